package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor"
)

type serveFlags struct {
	stateDir   string
	verbose    bool
	allowPaths []string
	approve    approveFlags
	sandbox    sandboxFlags
	journal    journalFlags
}

func newServeCmd() *cobra.Command {
	var f serveFlags
	c := &cobra.Command{
		Use:   "serve [--state-dir DIR] [--allow-path DIR]... [--sandbox MODE]",
		Short: "Hold the lane and run its instructions on this machine until stopped",
		Long: "serve dials out to the lane (no listening socket, ever), proves the device's identity and\n" +
			"runs the instructions it is sent. SIGTERM or SIGINT stops it gracefully (exit 0).\n" +
			"File instructions and a command's working directory are contained to the workspace root,\n" +
			"the directory for temporary files made through the lane, and each --allow-path; outside\n" +
			"them they are refused (permission_denied). The state dir is never served, whatever the\n" +
			"flags. Commands run in a sandbox (--sandbox, default workspace-write): they read everything\n" +
			"but the state dir and the credential stores (~/.ssh, ~/.aws, ... and each --deny-read),\n" +
			"write only under the workspace, the temporary directory, each --allow-path and the cache\n" +
			"dir, never see serve's SEMA_ variables, and nothing they start outlives their instruction.\n" +
			"Exit codes: 3 revoked (key deleted: enroll again), 4 superseded by another executor,\n" +
			"5 upgrade needed, 6 another serve of this device is already running, 1 other errors.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runServe(c, f) },
	}
	c.Flags().StringVar(&f.stateDir, "state-dir", "", "where the key and the record live (default $"+device.EnvStateDir+", else the OS config dir + /sema/device)")
	c.Flags().BoolVarP(&f.verbose, "verbose", "v", false, "log more")
	c.Flags().StringArrayVar(&f.allowPaths, "allow-path", nil, "also serve this directory to file instructions, and let commands write under it (repeatable; / serves the whole filesystem)")
	f.approve.register(c)
	f.sandbox.register(c)
	f.journal.register(c)
	return c
}

func runServe(c *cobra.Command, f serveFlags) error {
	if err := f.approve.check(); err != nil {
		return err
	}
	if err := f.sandbox.check(); err != nil {
		return err
	}
	allow, err := allowedDirs(f.allowPaths)
	if err != nil {
		return err
	}
	dir, err := device.StateDir(f.stateDir)
	if err != nil {
		return err
	}
	rec, err := device.LoadRecord(dir)
	if errors.Is(err, device.ErrNotEnrolled) {
		return fmt.Errorf("%w: run `sema device enroll` first", err)
	}
	if err != nil {
		return err
	}
	if rec.RevokedAt != nil {
		return exitf(ExitRevoked, "device %s was revoked on %s; enroll again (it yields a new device id)", rec.DeviceID, rec.RevokedAt.Format(time.RFC3339))
	}
	key, err := device.LoadKey(dir)
	if err != nil {
		return err
	}
	lock, warn, err := device.AcquireLock(dir, "", rec.DeviceID)
	var locked *device.LockedError
	if errors.As(err, &locked) {
		return &ExitError{Code: ExitLocked, Err: locked}
	}
	if err != nil {
		return err
	}
	defer lock.Release()
	log := newLogger(f.verbose)
	if warn != nil {
		log.Warn("single-instance lock", "warning", warn)
	}
	tmp, err := device.TempKindsDir()
	if err != nil {
		return err
	}
	env := containment(rec.WorkspaceRoot, tmp, allow, dir, lock)
	logContainment(log, env)
	if env.Sandbox, err = f.sandbox.build(sandboxRoots{workspace: rec.WorkspaceRoot, tempDir: tmp, stateDir: dir, allowPaths: allow}); err != nil {
		return err
	}
	logSandbox(log, env.Sandbox)
	j, err := f.journal.open(dir, log)
	if err != nil {
		return err
	}
	defer closeJournal(j, log)
	gate, stopGate, err := f.approve.start(rec.WorkspaceRoot, tmp, log)
	if err != nil {
		return err
	}
	defer stopGate()
	rt, err := executor.New(executor.Config{
		DeviceID:        rec.DeviceID,
		Key:             key,
		Server:          rec.Server,
		WorkspaceRoot:   rec.WorkspaceRoot,
		Ops:             env,
		Logger:          log,
		StatusPath:      filepath.Join(dir, device.StatusFile),
		ExecutorVersion: version(),
		Gate:            gate,
		Journal:         j,

		JournalDigestCommands: f.journal.commands == "digest",
	})
	if err != nil {
		return err
	}
	err = rt.Run(c.Context())
	var upgrade *executor.UpgradeRequiredError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, executor.ErrRevoked):
		if merr := device.MarkRevoked(dir, time.Now()); merr != nil {
			log.Error("could not delete the key material", "err", merr)
		}
		return exitf(ExitRevoked, "device %s has been revoked; its key was deleted from %s. Enroll again: it yields a new device id", rec.DeviceID, dir)
	case errors.Is(err, executor.ErrSuperseded):
		return &ExitError{Code: ExitSuperseded, Err: err}
	case errors.As(err, &upgrade):
		return &ExitError{Code: ExitUpgrade, Err: err}
	}
	return err
}
