package protocol

import (
	"testing"
)

func TestValidAbsPath(t *testing.T) {
	tests := []struct {
		p  string
		ok bool
	}{
		{"/", true},
		{"/a", true},
		{"/a/b", true},
		{"/w/a.txt", true},
		{"/a b/c", true},
		{"/.a", true},
		{"/a.", true},
		{"/a..", true},
		{"/...", true},
		{"/a\\b", true},
		{"/é/ü", true},
		{"", false},
		{"a", false},
		{"a/b", false},
		{"./a", false},
		{"../a", false},
		{"~/a", false},
		{" /a", false},
		{"//", false},
		{"//a", false},
		{"/a//b", false},
		{"/a/", false},
		{"/a/b/", false},
		{"/.", false},
		{"/..", false},
		{"/./a", false},
		{"/a/.", false},
		{"/a/./b", false},
		{"/a/..", false},
		{"/a/../b", false},
		{"/../a", false},
		{"/a\x00b", false},
		{"/\x00", false},
		{"\x00/a", false},
	}
	for _, tt := range tests {
		if got := ValidAbsPath(tt.p); got != tt.ok {
			t.Errorf("ValidAbsPath(%q) = %v, want %v", tt.p, got, tt.ok)
		}
	}
}

func TestParseGen(t *testing.T) {
	tests := []struct {
		s    string
		want Gen
		ok   bool
	}{
		{"0", 0, true},
		{"1", 1, true},
		{"7", 7, true},
		{"10", 10, true},
		{"1000000", 1000000, true},
		{"9007199254740993", 9007199254740993, true},
		{"18446744073709551615", 18446744073709551615, true},
		{"18446744073709551616", 0, false},
		{"99999999999999999999", 0, false},
		{"", 0, false},
		{"00", 0, false},
		{"07", 0, false},
		{"007", 0, false},
		{"+7", 0, false},
		{"-7", 0, false},
		{"-0", 0, false},
		{" 7", 0, false},
		{"7 ", 0, false},
		{"7\n", 0, false},
		{"7.0", 0, false},
		{"7.", 0, false},
		{"7e0", 0, false},
		{"0x7", 0, false},
		{"1_000", 0, false},
		{`"7"`, 0, false},
		{"٧", 0, false},
		{"７", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseGen(tt.s)
		if (err == nil) != tt.ok {
			t.Errorf("ParseGen(%q) err = %v, want ok=%v", tt.s, err, tt.ok)
			continue
		}
		if !tt.ok {
			continue
		}
		if got != tt.want {
			t.Errorf("ParseGen(%q) = %d, want %d", tt.s, got, tt.want)
		}
		// Canonical spellings only: formatting gives back the string.
		if got.String() != tt.s {
			t.Errorf("ParseGen(%q).String() = %q", tt.s, got.String())
		}
		var g Gen
		if err := g.UnmarshalText([]byte(tt.s)); err != nil || g != tt.want {
			t.Errorf("UnmarshalText(%q) = %d, %v", tt.s, g, err)
		}
	}
}
