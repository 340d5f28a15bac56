package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/protocol"
)

// StreamBytes is how much output the throughput pair moves per run.
const StreamBytes = 256 << 20

// WriteBytes is the size of the file the write pair moves per run.
const WriteBytes = 256 << 20

// Pair is a measurement through the lane and its local baseline.
type Pair struct {
	Name     string
	Lane     func(b *testing.B, r *Rig)
	Baseline func(b *testing.B)
	// SSH, when not nil, is the same work over ssh to 127.0.0.1.
	SSH func(b *testing.B)
}

// Pairs are the measurements of the lane against local work.
var Pairs = []Pair{
	{Name: "exists (round trip)", Lane: LaneExists, Baseline: LocalExists},
	{Name: "exec true (round trip)", Lane: LaneExecTrue, Baseline: LocalShTrue, SSH: SSHTrue},
	{Name: "stdout 256 MiB", Lane: LaneStdout, Baseline: LocalPipe, SSH: SSHStdout},
	{Name: "writeFile 256 MiB", Lane: LaneWriteFile, Baseline: LocalCopy, SSH: SSHWrite},
}

// LaneExists: Dispatch of exists on the workspace root, until it settles:
// the lane's own cost of a round trip, with no process to spawn.
func LaneExists(b *testing.B, r *Rig) {
	ctx := context.Background()
	for b.Loop() {
		if _, _, err := r.Run(ctx, lane.Instruction{Kind: protocol.KindExists, Args: protocol.PathArgs{Path: r.Workspace}, Timeout: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
}

// LocalExists: the same question asked locally.
func LocalExists(b *testing.B) {
	dir := b.TempDir()
	for b.Loop() {
		if _, err := os.Lstat(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// LaneExecTrue: Dispatch of execStream `true`, until it settles.
func LaneExecTrue(b *testing.B, r *Rig) {
	ctx := context.Background()
	for b.Loop() {
		if _, _, err := r.Run(ctx, lane.Instruction{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "true"}, Timeout: time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
}

// LocalShTrue: the same command spawned locally.
func LocalShTrue(b *testing.B) {
	for b.Loop() {
		if err := exec.Command("/bin/sh", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
}

// LaneStdout: StreamBytes of stdout through the lane, delivered to the caller.
func LaneStdout(b *testing.B, r *Rig) {
	ctx := context.Background()
	b.SetBytes(StreamBytes)
	for b.Loop() {
		n, o, err := r.Run(ctx, lane.Instruction{Kind: protocol.KindExecStream,
			Args: protocol.CommandArgs{Command: fmt.Sprintf("head -c %d /dev/zero", StreamBytes)}, Timeout: 10 * time.Minute})
		if err != nil || n != StreamBytes {
			b.Fatalf("%d bytes, outcome %+v, %v", n, o, err)
		}
	}
}

// LocalPipe: the same command's stdout read through a local pipe.
func LocalPipe(b *testing.B) {
	b.SetBytes(StreamBytes)
	for b.Loop() {
		cmd := exec.Command("/bin/sh", "-c", fmt.Sprintf("head -c %d /dev/zero", StreamBytes))
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil || n != StreamBytes {
			b.Fatalf("%d bytes, %v", n, err)
		}
	}
}

func randomContent(b *testing.B, n int) []byte {
	data := make([]byte, n)
	rand.Read(data)
	return data
}

// LaneWriteFile: a WriteBytes writeFile through the lane (payload parts,
// digest check, fsync, rename on the device).
func LaneWriteFile(b *testing.B, r *Rig) {
	ctx := context.Background()
	content := randomContent(b, WriteBytes)
	path := filepath.Join(r.Workspace, "bench.bin")
	b.SetBytes(WriteBytes)
	b.ResetTimer()
	for b.Loop() {
		if _, _, err := r.Run(ctx, lane.Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: path}, Content: content, Timeout: 10 * time.Minute}); err != nil {
			b.Fatal(err)
		}
	}
}

// LocalCopy: `cp` of a WriteBytes file followed by sync of the copy: the
// local way to land the same bytes durably.
func LocalCopy(b *testing.B) {
	dir := b.TempDir()
	src := filepath.Join(dir, "src.bin")
	if err := os.WriteFile(src, randomContent(b, WriteBytes), 0o600); err != nil {
		b.Fatal(err)
	}
	dst := filepath.Join(dir, "dst.bin")
	b.SetBytes(WriteBytes)
	b.ResetTimer()
	for b.Loop() {
		if err := exec.Command("/bin/sh", "-c", "cp "+src+" "+dst+" && sync "+dst).Run(); err != nil {
			b.Fatal(err)
		}
	}
}
