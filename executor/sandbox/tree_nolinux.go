//go:build !linux

package sandbox

import "syscall"

// Tree is a command's process tree where it can be followed beyond its
// process group; only Linux can (Landlock's signal scope), so Launch here
// returns a nil Tree, and its methods are safe on it.
type Tree struct{}

// Signal does nothing: the process group is signalled by the caller.
func (t *Tree) Signal(...syscall.Signal) {}

// Empty reports true: nothing is followed beyond the process group.
func (t *Tree) Empty() bool { return true }

// Close does nothing.
func (t *Tree) Close() {}
