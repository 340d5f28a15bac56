// Package version says which version of sema a binary was built from.
package version

import "runtime/debug"

// Module is sema's module path.
const Module = "github.com/sema-agent/sema"

// String is the version of the sema module in this binary: the main
// module's (the sema binary) or the dependency's (a program embedding the
// lane), or "dev" for a build from a work tree.
func String() string { return Read().Version }

// Info is what the binary knows of its build. Commit, Date and Modified
// come from the version control stamp `go build` leaves in a binary built
// in a checkout (empty without one: `go run`, -buildvcs=false, a module
// download).
type Info struct {
	Version  string `json:"version"`            // the module version, or "dev"
	Commit   string `json:"commit,omitempty"`   // vcs.revision
	Date     string `json:"date,omitempty"`     // vcs.time: the commit's time, RFC 3339
	Modified bool   `json:"modified,omitempty"` // vcs.modified: the tree had changes
	Go       string `json:"go"`                 // the toolchain that built it
}

// Read is this binary's Info.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "dev"}
	}
	info := Info{Go: bi.GoVersion}
	if bi.Main.Path == Module {
		info.Version = bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				info.Commit = s.Value
			case "vcs.time":
				info.Date = s.Value
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	for _, d := range bi.Deps {
		if d.Path == Module {
			info.Version = d.Version
		}
	}
	if info.Version == "" || info.Version == "(devel)" {
		info.Version = "dev"
	}
	return info
}
