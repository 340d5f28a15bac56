//go:build linux || darwin

package ops

import (
	"context"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/sema-agent/sema/protocol"
)

// The write path against its local baseline, side by side:
//
//	go test -run '^$' -bench '256MiB' -benchtime 5x ./executor/ops
//
// BenchmarkWriteFile256MiB writes 256 MiB through File from a payload
// channel of 256 KiB parts (the spec's defaultPayloadPartBytes): staging
// file, SHA-256 of every byte, fsync, rename. BenchmarkLocalCp256MiB copies
// a 256 MiB file with io.Copy (copy_file_range, as cp does) and fsyncs it;
// BenchmarkLocalCpHashed256MiB does the same through SHA-256, the one piece
// of work the protocol adds (§3.4: verify the digest). All overwrite one
// target per iteration on the same filesystem. The payload's base64
// decoding belongs to the frame decoder and is not here.

const benchSize = 256 << 20

func benchContent(b *testing.B) []byte {
	b.Helper()
	content := make([]byte, benchSize)
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(content)
	return content
}

func BenchmarkWriteFile256MiB(b *testing.B) {
	content := benchContent(b)
	frames := payloadFrames(content, protocol.DefaultPayloadPartBytes)
	p := b.TempDir() + "/target"
	args := writeArgs(p, content)
	b.SetBytes(benchSize)
	for b.Loop() {
		ch := make(chan *protocol.Payload, 4)
		stop := make(chan struct{})
		fed := make(chan struct{})
		go func() {
			defer close(fed)
			defer close(ch)
			for _, f := range frames {
				select {
				case ch <- f:
				case <-stop:
					return
				}
			}
		}()
		out := File(context.Background(), &Env{}, Request{InstructionID: "01TEST", Kind: protocol.KindWriteFile, Args: args, Payload: ch}, &fsSink{})
		close(stop)
		<-fed
		if _, ok := out.(protocol.WriteOutcome); !ok {
			b.Fatalf("%#v", out)
		}
	}
}

func BenchmarkLocalCp256MiB(b *testing.B) { benchCopy(b, false) }

func BenchmarkLocalCpHashed256MiB(b *testing.B) { benchCopy(b, true) }

func benchCopy(b *testing.B, hashed bool) {
	dir := b.TempDir()
	if err := os.WriteFile(dir+"/src", benchContent(b), 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(benchSize)
	for b.Loop() {
		src, err := os.Open(dir + "/src")
		if err != nil {
			b.Fatal(err)
		}
		dst, err := os.Create(dir + "/dst")
		if err != nil {
			b.Fatal(err)
		}
		var r io.Reader = src
		h := sha256.New()
		if hashed {
			r = io.TeeReader(src, h)
		}
		if _, err := io.Copy(dst, r); err != nil {
			b.Fatal(err)
		}
		if hashed && len(h.Sum(nil)) != sha256.Size {
			b.Fatal("no digest")
		}
		if err := dst.Sync(); err != nil {
			b.Fatal(err)
		}
		dst.Close()
		src.Close()
	}
}
