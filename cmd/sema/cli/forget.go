package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/internal/safetext"
)

type forgetFlags struct {
	stateDir string
}

func newForgetCmd() *cobra.Command {
	var f forgetFlags
	c := &cobra.Command{
		Use:   "forget [--state-dir DIR]",
		Short: "Delete this machine's device key and record",
		Long: "forget deletes the device key, the record and the status file from the state dir. The device\n" +
			"id is dead for this machine afterwards (enrolling again yields a new one). It refuses while a\n" +
			"`sema device serve` of the device runs (exit 6): stop it first. The lane still lists the\n" +
			"device until you revoke it there (sema devices revoke ID), then sema devices forget ID drops\n" +
			"it from the list.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runForget(f) },
	}
	c.Flags().StringVar(&f.stateDir, "state-dir", "", "where the key and the record live (default $"+device.EnvStateDir+", else the OS config dir + /sema/device)")
	return c
}

func runForget(f forgetFlags) error {
	dir, err := device.StateDir(f.stateDir)
	if err != nil {
		return err
	}
	rec, err := device.LoadRecord(dir)
	if errors.Is(err, device.ErrNotEnrolled) {
		// A key without a record is an enrollment that never finished.
		if err := device.RemoveKey(dir); err != nil {
			return err
		}
		fmt.Fprintf(Stdout, "nothing to forget: no device is enrolled in %s\n", dir)
		return nil
	}
	if err != nil {
		return err
	}
	lock, _, err := device.AcquireLock(dir, "", rec.DeviceID)
	var locked *device.LockedError
	if errors.As(err, &locked) {
		return &ExitError{Code: ExitLocked, Err: fmt.Errorf("%w; stop it before forgetting the device", locked)}
	}
	if err != nil {
		return err
	}
	defer lock.Release()
	if err := device.RemoveKey(dir); err != nil {
		return err
	}
	lockName := "device-" + rec.DeviceID + ".lock"
	for _, p := range []string{
		filepath.Join(dir, device.RecordFile), filepath.Join(dir, device.StatusFile),
		filepath.Join(dir, lockName), filepath.Join(device.MachineLockDir(), lockName),
	} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("forget: %w", err)
		}
	}
	id := safetext.String(rec.DeviceID) // the lane's answer, kept in the record
	fmt.Fprintf(Stdout, "forgot device %s: its key and record are deleted from %s\n", id, safetext.String(dir))
	if rec.RevokedAt == nil {
		fmt.Fprintf(Stderr, "The lane still lists it; revoke it there: sema devices revoke %s\n", id)
	}
	return nil
}
