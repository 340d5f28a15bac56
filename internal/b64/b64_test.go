package b64

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// Every length around the vector blocks (the SIMD loops take 24–48 bytes at
// a time; the standard library finishes the tail): the same bytes as
// StdEncoding, and they decode back.
func TestEncodeIsStdEncodingAtEveryLength(t *testing.T) {
	src := make([]byte, 600)
	for i := range src {
		src[i] = byte(i*131 + i>>3)
	}
	for n := 0; n <= len(src); n++ {
		want := base64.StdEncoding.EncodeToString(src[:n])
		got := AppendEncode([]byte("x"), src[:n])
		if string(got[1:]) != want || got[0] != 'x' {
			t.Fatalf("len %d: %q, want x%q", n, got, want)
		}
		out := make([]byte, DecodedLen(len(want)))
		m, err := DecodeStrict(out, []byte(want))
		if err != nil || !bytes.Equal(out[:m], src[:n]) {
			t.Fatalf("len %d: decoding back: %v", n, err)
		}
	}
}

// Strict verdicts, including inputs whose fault sits inside a block the
// vector loop would take.
func TestDecodeStrictRefusesWhatStrictRefuses(t *testing.T) {
	good := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xfb, 0xff, 0x01}, 40))
	for _, bad := range []string{
		good[:50] + "-" + good[51:],    // URL-safe alphabet in the middle
		good[:50] + "=" + good[51:],    // padding in the middle
		good[:10] + "\x00" + good[11:], // NUL
		good[:100] + "é" + good[102:],  // non-ASCII
		good + "QQ==QQ==",              // data after padding
		good + "QR==",                  // non-zero padding bits
		good + "QQ=",                   // short padding
		good + "Q",                     // a lone sextet
	} {
		out := make([]byte, DecodedLen(len(bad)))
		_, err := DecodeStrict(out, []byte(bad))
		_, want := base64.StdEncoding.Strict().DecodeString(bad)
		if (err == nil) != (want == nil) || err == nil {
			t.Errorf("%q: error %v, the standard library says %v", bad, err, want)
		}
	}
}

func FuzzDecodeStrictAgreesWithTheStandardLibrary(f *testing.F) {
	f.Add([]byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte("sema"), 30))))
	f.Add([]byte("QQ=="))
	f.Add([]byte("QR=="))
	f.Add([]byte("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\nAAAA"))
	f.Fuzz(func(t *testing.T, src []byte) {
		got := make([]byte, DecodedLen(len(src)))
		n, err := DecodeStrict(got, src)
		want := make([]byte, base64.StdEncoding.DecodedLen(len(src)))
		m, werr := base64.StdEncoding.Strict().Decode(want, src)
		if (err == nil) != (werr == nil) {
			t.Fatalf("%q: error %v, the standard library says %v", src, err, werr)
		}
		if err == nil && !bytes.Equal(got[:n], want[:m]) {
			t.Fatalf("%q: decoded %x, the standard library %x", src, got[:n], want[:m])
		}
		if err == nil && n > 0 && !bytes.Contains(src, []byte("\n")) && !bytes.Contains(src, []byte("\r")) {
			if enc := AppendEncode(nil, got[:n]); !bytes.Equal(enc, src) {
				t.Fatalf("%q decodes but re-encodes as %q", src, enc)
			}
		}
	})
}

func BenchmarkEncode64KiB(b *testing.B) {
	src := make([]byte, 64<<10)
	dst := make([]byte, 0, EncodedLen(len(src)))
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		AppendEncode(dst[:0], src)
	}
}

func BenchmarkDecode64KiB(b *testing.B) {
	src := []byte(base64.StdEncoding.EncodeToString(make([]byte, 64<<10)))
	dst := make([]byte, DecodedLen(len(src)))
	b.SetBytes(64 << 10)
	for b.Loop() {
		if _, err := DecodeStrict(dst, src); err != nil {
			b.Fatal(err)
		}
	}
}
