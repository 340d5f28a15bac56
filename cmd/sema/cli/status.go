package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/device"
	"github.com/sema-agent/sema/executor"
	"github.com/sema-agent/sema/executor/sandbox"
	"github.com/sema-agent/sema/internal/safetext"
)

type statusFlags struct {
	stateDir string
	json     bool
}

func newStatusCmd() *cobra.Command {
	var f statusFlags
	c := &cobra.Command{
		Use:   "status [--state-dir DIR] [--json]",
		Short: "Show whether this device's executor is running and connected",
		Long: "status reads the device record and the status file `sema device serve` keeps in the state\n" +
			"dir (it never opens a socket: the executor has no inbound surface). It exits 0 when a serve\n" +
			"process is running and connected to the lane, 1 otherwise.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runStatus(f) },
	}
	c.Flags().StringVar(&f.stateDir, "state-dir", "", "where the key and the record live (default $"+device.EnvStateDir+", else the OS config dir + /sema/device)")
	c.Flags().BoolVar(&f.json, "json", false, "print the record and the status as JSON")
	return c
}

// deviceStatus is what status reports.
type deviceStatus struct {
	StateDir string           `json:"stateDir"`
	Record   device.Record    `json:"record"`
	Serve    *executor.Status `json:"serve,omitempty"` // nil when no serve ever wrote one
	Running  bool             `json:"running"`         // a serve process of this device is alive
	Conn     bool             `json:"connected"`       // … and holds the lane
	Notes    []string         `json:"notes,omitempty"`
}

func runStatus(f statusFlags) error {
	dir, err := device.StateDir(f.stateDir)
	if err != nil {
		return err
	}
	rec, err := device.LoadRecord(dir)
	if errors.Is(err, device.ErrNotEnrolled) {
		return fmt.Errorf("not enrolled (state dir %s): `sema token` on a machine with your API key prints the enroll line", dir)
	}
	if err != nil {
		return err
	}
	ds := deviceStatus{StateDir: dir, Record: rec}
	st, err := executor.ReadStatus(filepath.Join(dir, device.StatusFile))
	switch {
	case err == nil && st.DeviceID == rec.DeviceID:
		ds.Serve = &st
		ds.Running = !st.Stopped && pidAlive(st.PID)
		ds.Conn = ds.Running && st.Connected
	case err == nil:
		ds.Notes = append(ds.Notes, "the status file belongs to an earlier device ("+st.DeviceID+")")
	case !errors.Is(err, fs.ErrNotExist):
		ds.Notes = append(ds.Notes, "the status file is unreadable: "+err.Error())
	}
	if f.json {
		b, _ := json.MarshalIndent(ds, "", "  ")
		fmt.Fprintf(Stdout, "%s\n", safetext.JSON(b))
	} else {
		printStatus(ds)
	}
	if !ds.Conn {
		return &ExitError{Code: ExitFailure, Err: errors.New(statusSummary(ds))}
	}
	return nil
}

func printStatus(ds deviceStatus) {
	rec := ds.Record
	// The record and the status hold what the lane said (ids, paths, errors).
	line := func(k, v string) { fmt.Fprintf(Stdout, "%-10s %s\n", k, safetext.String(v)) }
	line("device", rec.DeviceID)
	line("server", rec.Server)
	line("workspace", rec.WorkspaceRoot)
	if rec.RevokedAt != nil {
		line("revoked", rec.RevokedAt.Local().Format(time.RFC3339)+": enroll again (it yields a new device id)")
	}
	st := ds.Serve
	switch {
	case st == nil:
		line("serve", "never started here")
	case ds.Running && st.Stopping:
		line("serve", fmt.Sprintf("shutting down: goodbye sent, finishing the work in flight (pid %d)", st.PID))
	case ds.Running:
		line("serve", fmt.Sprintf("running (pid %d, since %s)", st.PID, st.Since.Local().Format(time.RFC3339)))
	case st.Stopped:
		line("serve", "stopped at "+st.UpdatedAt.Local().Format(time.RFC3339))
	default:
		line("serve", fmt.Sprintf("gone (pid %d ended without a clean stop at about %s)", st.PID, st.UpdatedAt.Local().Format(time.RFC3339)))
	}
	if st != nil && ds.Running {
		if st.Connected {
			line("lane", "connected, gen "+st.Gen)
		} else {
			line("lane", "not connected (reconnecting)")
		}
		inflight := fmt.Sprint(len(st.Inflight))
		if len(st.Inflight) > 0 {
			inflight += " (" + strings.Join(st.Inflight, ", ") + ")"
		}
		line("in flight", inflight)
		line("epoch", st.Epoch)
		sandboxLines(line, st.Sandbox)
	}
	if st != nil && st.LastError != "" {
		line("last error", st.LastError)
	}
	if st != nil {
		line("updated", time.Since(st.UpdatedAt).Round(time.Second).String()+" ago")
	}
	for _, n := range ds.Notes {
		line("note", n)
	}
}

// sandboxLines says what confines the commands of a running serve.
func sandboxLines(line func(k, v string), sb *sandbox.Summary) {
	if sb == nil {
		return
	}
	switch sb.Mode {
	case sandbox.Off:
		line("sandbox", "off: commands are unconfined; network "+sb.Network)
		return
	default:
		line("sandbox", string(sb.Mode)+", network "+sb.Network)
	}
	line("writable", strings.Join(sb.Writable, ", "))
	line("hidden", strings.Join(sb.Hidden, ", "))
}

func statusSummary(ds deviceStatus) string {
	switch {
	case ds.Record.RevokedAt != nil:
		return "device " + ds.Record.DeviceID + " is revoked"
	case !ds.Running:
		return "no `sema device serve` is running for device " + ds.Record.DeviceID
	}
	return "device " + ds.Record.DeviceID + " is not connected to the lane"
}

// pidAlive reports whether a process with this pid exists.
func pidAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
