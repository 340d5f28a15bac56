package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/protocol"
)

// The pairs as `go test -bench`: BenchmarkPairs/<name>/{lane,local,ssh}.
func BenchmarkPairs(b *testing.B) {
	r, err := NewRig(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	for _, p := range Pairs {
		b.Run(p.Name+"/lane", func(b *testing.B) { p.Lane(b, r) })
		b.Run(p.Name+"/local", p.Baseline)
		if p.SSH != nil {
			b.Run(p.Name+"/ssh", p.SSH)
		}
	}
}

// The rig measures what it claims: the streamed bytes all arrive, and the
// written file lands whole.
func TestRigDeliversWhatItMeasures(t *testing.T) {
	r, err := NewRig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	n, o, err := r.Run(ctx, lane.Instruction{Kind: protocol.KindExecStream, Args: protocol.CommandArgs{Command: "head -c 3000000 /dev/zero"}, Timeout: time.Minute})
	if err != nil || n != 3000000 || o.Kind() != protocol.OutcomeExec {
		t.Fatalf("stream: %d bytes, %v, %v", n, o, err)
	}
	content := bytes.Repeat([]byte("sema"), 300000)
	path := filepath.Join(r.Workspace, "f.bin")
	if _, _, err := r.Run(ctx, lane.Instruction{Kind: protocol.KindWriteFile, Args: protocol.WriteArgs{Path: path}, Content: content, Timeout: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the written file differs (%d bytes, %v)", len(got), err)
	}
}
