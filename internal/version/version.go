// Package version says which version of sema a binary was built from.
package version

import "runtime/debug"

// Module is sema's module path.
const Module = "github.com/sema-agent/sema"

// String is the version of the sema module in this binary: the main
// module's (the sema binary) or the dependency's (a program embedding the
// lane), or "dev" for a build from a work tree.
func String() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	v := ""
	if bi.Main.Path == Module {
		v = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == Module {
			v = d.Version
		}
	}
	if v == "" || v == "(devel)" {
		return "dev"
	}
	return v
}
