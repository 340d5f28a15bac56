package protocol

// The closed sets of this file are closed by the spec's text rather than by
// a marked table; closedsets.go holds the marked ones.

// OutcomeKind is the kind of a success outcome arm (§3.3).
type OutcomeKind string

const (
	OutcomeExec      OutcomeKind = "exec"
	OutcomeRead      OutcomeKind = "read"
	OutcomeStat      OutcomeKind = "stat"
	OutcomeWrite     OutcomeKind = "write"
	OutcomeVoid      OutcomeKind = "void"
	OutcomeCancelled OutcomeKind = "cancelled"
)

var outcomeKinds = closedSet[OutcomeKind]{"outcome kinds (§3.3)", []OutcomeKind{
	OutcomeExec, OutcomeRead, OutcomeStat, OutcomeWrite, OutcomeVoid, OutcomeCancelled,
}}

// OutcomeKinds lists every success outcome kind.
func OutcomeKinds() []OutcomeKind { return outcomeKinds.all() }

// ParseOutcomeKind refuses anything outside the §3.3 outcome arms.
func ParseOutcomeKind(s string) (OutcomeKind, error) { return outcomeKinds.parse(s) }

// Valid reports whether k is one of the §3.3 outcome arms.
func (k OutcomeKind) Valid() bool { return outcomeKinds.has(k) }

// PayloadPart is the part of a payload frame (§2.3, §3.4).
type PayloadPart string

const (
	PartBegin  PayloadPart = "begin"  // carries totalLen and sha256
	PartChunk  PayloadPart = "chunk"  // carries offset and dataB64
	PartCommit PayloadPart = "commit" // carries totalLen and sha256
)

var payloadParts = closedSet[PayloadPart]{"payload parts (§2.3)", []PayloadPart{
	PartBegin, PartChunk, PartCommit,
}}

// PayloadParts lists every payload part.
func PayloadParts() []PayloadPart { return payloadParts.all() }

// ParsePayloadPart refuses anything outside begin, chunk, commit.
func ParsePayloadPart(s string) (PayloadPart, error) { return payloadParts.parse(s) }

// Valid reports whether p is begin, chunk or commit.
func (p PayloadPart) Valid() bool { return payloadParts.has(p) }

// FileKind is the kind of a WireFileInfo (§3.3).
type FileKind string

const (
	FileKindFile    FileKind = "file"
	FileKindDir     FileKind = "dir"
	FileKindSymlink FileKind = "symlink"
	FileKindOther   FileKind = "other"
)

var fileKinds = closedSet[FileKind]{"WireFileInfo kinds (§3.3)", []FileKind{
	FileKindFile, FileKindDir, FileKindSymlink, FileKindOther,
}}

// FileKinds lists every WireFileInfo kind.
func FileKinds() []FileKind { return fileKinds.all() }

// ParseFileKind refuses anything outside file, dir, symlink, other.
func ParseFileKind(s string) (FileKind, error) { return fileKinds.parse(s) }

// Valid reports whether k is file, dir, symlink or other.
func (k FileKind) Valid() bool { return fileKinds.has(k) }

// PlatformOS is the enrolled platformOs (§1.1): darwin or linux, no third value.
type PlatformOS string

const (
	OSDarwin PlatformOS = "darwin"
	OSLinux  PlatformOS = "linux"
)

var platformOSes = closedSet[PlatformOS]{"platformOs (§1.1)", []PlatformOS{OSDarwin, OSLinux}}

// PlatformOSes lists every accepted platformOs.
func PlatformOSes() []PlatformOS { return platformOSes.all() }

// ParsePlatformOS refuses anything but darwin and linux.
func ParsePlatformOS(s string) (PlatformOS, error) { return platformOSes.parse(s) }

// Valid reports whether o is darwin or linux.
func (o PlatformOS) Valid() bool { return platformOSes.has(o) }
