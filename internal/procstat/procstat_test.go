package procstat

import "testing"

func TestParse(t *testing.T) {
	cases := []struct {
		line string
		want Stat
		ok   bool
	}{
		{"42 (sh) S 7 42 42 0 -1", Stat{'S', 7, 42}, true},
		{"43 (a (weird) name) Z 1 40 40 0", Stat{'Z', 1, 40}, true},
		{"44 (x) R", Stat{}, false},
		{"45 no parens S 1 2", Stat{}, false},
		{"46 (x) SS 1 2", Stat{}, false},
		{"47 (x) S one 2", Stat{}, false},
	}
	for _, c := range cases {
		got, ok := Parse([]byte(c.line))
		if got != c.want || ok != c.ok {
			t.Errorf("Parse(%q) = %+v, %v; want %+v, %v", c.line, got, ok, c.want, c.ok)
		}
	}
	if !(Stat{State: 'Z'}).Zombie() || (Stat{State: 'S'}).Zombie() {
		t.Error("Zombie")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("42 (sh) S 7 42 42 0 -1"))
	f.Add([]byte("1 ()) ) Z 0 0"))
	f.Fuzz(func(t *testing.T, line []byte) {
		if s, ok := Parse(line); !ok && s != (Stat{}) {
			t.Fatalf("a refused line gave %+v", s)
		}
	})
}
