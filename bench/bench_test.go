package bench

import (
	"testing"
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

// The rig itself works: one instruction of each pair, once.
func TestRigRunsEachPairOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 512 MiB")
	}
	r, err := NewRig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, p := range Pairs {
		res := testing.Benchmark(func(b *testing.B) { p.Lane(b, r) })
		if res.N < 1 {
			t.Fatalf("%s did not run", p.Name)
		}
	}
}
