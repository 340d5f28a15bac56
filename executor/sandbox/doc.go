// Package sandbox confines the commands an executor runs: one Policy
// (policy.go: NewPolicy resolves the roots, the hidden paths and the
// network setting of --sandbox, --allow-path, --deny-read, --allow-read and
// --sandbox-network into absolute, canonical paths) with a renderer per
// platform. It refuses and never redirects: what a command may not do
// fails with the kernel's own error.
//
// Where to start reading:
//
//   - policy.go, plan.go: the policy, and the grants a confining mode makes
//     of it (whole hierarchies, cut around each hidden path).
//   - sandbox_linux.go: each command starts from a locked OS thread of its
//     own, which enters a Landlock domain (landlock_linux.go) and loads a
//     seccomp network filter (seccomp_linux.go) before it forks the shell;
//     the domain, with Landlock's signal scope and the executor as a child
//     subreaper, also follows and ends the command's whole process tree
//     (proc_linux.go).
//   - sandbox_darwin.go, seatbelt.go: the same policy as a Seatbelt
//     profile for sandbox-exec.
//   - sandbox_other.go, tree_nolinux.go: what other platforms get.
package sandbox
