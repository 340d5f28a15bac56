package protocol

import (
	"encoding/hex"
	"fmt"
	"path"
	"strings"
)

// Args are the typed arguments of an instruction (§3.1). Each kind has one
// Args type; ArgsFor names it.
type Args interface{ isArgs() }

// CommandArgs: exec, execStream.
type CommandArgs struct {
	Command string `json:"command"`
}

// PathArgs: readTextFile, readBinaryFile, fileInfo, listDir, canonicalPath,
// exists, readLink.
type PathArgs struct {
	Path string `json:"path"`
}

// ReadLinesArgs: readTextLines. Limit is the maximum number of lines; Offset
// is never sent today (§8) but accepted.
type ReadLinesArgs struct {
	Path   string `json:"path"`
	Offset *int64 `json:"offset,omitzero"`
	Limit  *int64 `json:"limit,omitzero"`
}

// WriteArgs: writeFile, writeFileExclusive, writeFileGuarded (with Expect,
// required there and refused elsewhere), appendFile. The content follows as
// a payload sub-sequence (§3.4).
type WriteArgs struct {
	Path       string  `json:"path"`
	ContentLen int64   `json:"contentLen"`
	SHA256     Digest  `json:"sha256"`
	Expect     *Expect `json:"expect,omitzero"`
}

// Expect is writeFileGuarded's precondition (§3.5).
type Expect struct {
	CanonicalPath string `json:"canonicalPath"`
	FileID        string `json:"fileId,omitzero"`
	Exclusive     bool   `json:"exclusive,omitzero"`
	NoFollow      bool   `json:"noFollow,omitzero"`
}

// DirArgs: createDir (the server sends recursive:true by default) and remove
// (recursive:false by default). Recursive is nil when absent.
type DirArgs struct {
	Path      string `json:"path"`
	Recursive *bool  `json:"recursive,omitzero"`
}

// TempDirArgs: createTempDir.
type TempDirArgs struct {
	Prefix string `json:"prefix,omitzero"`
}

// TempFileArgs: createTempFile.
type TempFileArgs struct {
	Prefix string `json:"prefix,omitzero"`
	Suffix string `json:"suffix,omitzero"`
}

// StatBatchArgs: statBatch (declared, never dispatched today).
type StatBatchArgs struct {
	Paths []string `json:"paths"`
}

func (CommandArgs) isArgs()   {}
func (PathArgs) isArgs()      {}
func (ReadLinesArgs) isArgs() {}
func (WriteArgs) isArgs()     {}
func (DirArgs) isArgs()       {}
func (TempDirArgs) isArgs()   {}
func (TempFileArgs) isArgs()  {}
func (StatBatchArgs) isArgs() {}

// ArgsFits reports whether a is the Args type of kind k.
func ArgsFits(k InstructionKind, a Args) bool {
	switch a := a.(type) {
	case CommandArgs:
		return k.IsExec()
	case PathArgs:
		switch k {
		case KindReadTextFile, KindReadBinaryFile, KindFileInfo, KindListDir,
			KindCanonicalPath, KindExists, KindReadLink:
			return true
		}
	case ReadLinesArgs:
		return k == KindReadTextLines
	case WriteArgs:
		return k.IsWrite() && (a.Expect != nil) == (k == KindWriteFileGuarded)
	case DirArgs:
		return k == KindCreateDir || k == KindRemove
	case TempDirArgs:
		return k == KindCreateTempDir
	case TempFileArgs:
		return k == KindCreateTempFile
	case StatBatchArgs:
		return k == KindStatBatch
	}
	return false
}

// Digest is a SHA-256 digest; on the wire, 64 hex characters (§3.4). It is
// written in lower case; either case is read.
type Digest [32]byte

// String returns the lower-case hex form.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// MarshalText writes the lower-case hex form.
func (d Digest) MarshalText() ([]byte, error) { return hex.AppendEncode(nil, d[:]), nil }

// UnmarshalText reads exactly 64 hex characters.
func (d *Digest) UnmarshalText(b []byte) error {
	v, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = v
	return nil
}

// ParseDigest reads exactly 64 hex characters.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 64 {
		return d, fmt.Errorf("sha256 must be 64 hex characters, got %d characters", len(s))
	}
	if _, err := hex.Decode(d[:], []byte(s)); err != nil {
		return d, fmt.Errorf("sha256 is not hex")
	}
	return d, nil
}

// ValidAbsPath reports whether p is absolute and POSIX-normalized, as every
// path and cwd must arrive (§3.1): it starts with "/", has no ".", ".." or
// empty segment, no trailing slash but for "/" itself, and no NUL byte. The
// executor resolves nothing itself (§6.6), so anything else is refused.
func ValidAbsPath(p string) bool {
	return strings.HasPrefix(p, "/") && path.Clean(p) == p && !strings.ContainsRune(p, 0)
}

// ArgsPath is the path an instruction's args name, "" for kinds without one
// (exec, the temp kinds, statBatch).
func ArgsPath(a Args) string {
	switch a := a.(type) {
	case PathArgs:
		return a.Path
	case ReadLinesArgs:
		return a.Path
	case WriteArgs:
		return a.Path
	case DirArgs:
		return a.Path
	}
	return ""
}
