package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/words"
)

// This file is what every user command shares to reach the lane: the
// flags, the API key, the client (package client), the device. The calls
// themselves and their exit codes are in outcome.go.

// Environment of the user commands.
const (
	EnvServer = "SEMA_SERVER" // the lane's base URL
	EnvDevice = "SEMA_DEVICE" // the default device of run and fs
	// DefaultServer is where `sema server` listens by default.
	DefaultServer = "http://127.0.0.1:8420"
)

// Exit codes of run and fs besides the remote command's own (see run.go).
const (
	ExitTimeout      = 124 // the device killed the command at --timeout
	ExitNeverStarted = 125 // the lane refused it or it never started: nothing ran, safe to retry
	ExitCancelled    = 130 // Ctrl-C: the device confirmed the command was stopped (128 + SIGINT)
	// ExitLaneCancelled: the lane itself cancelled the command (its output
	// outran the pending-delivery bound, §4); the output is incomplete.
	ExitLaneCancelled = 254
	ExitLaneFailure   = 255 // any other failure; the command may have run (outcome_unknown, a broken stream, a connection broken after the request was sent)
)

// clientFlags are the flags of every command that talks to the lane as a
// user.
type clientFlags struct {
	server  string
	keyFile string
}

func addClientFlags(c *cobra.Command, f *clientFlags) {
	addServerFlag(c, &f.server)
	c.Flags().StringVar(&f.keyFile, "admin-key-file", "", "read the API key from this file (e.g. <data>/admin.key) instead of $"+EnvAPIKey)
}

// addServerFlag is --server, the lane's base URL, as every command that
// talks to the lane takes it. Its default is said once, in words: the
// flag itself defaults to "" (see serverURL).
func addServerFlag(c *cobra.Command, server *string) {
	c.Flags().StringVar(server, "server", "", "the lane's base URL (default $"+EnvServer+", else the saved login's, else "+DefaultServer+")")
}

// serverURL is the lane's URL for a command that has no API key to send:
// --server, else $SEMA_SERVER, else the saved login's, else the default.
func serverURL(flag string) string {
	server, _, _, _ := credentials(flag, "")
	return server
}

// client returns the lane's client for the flags and the user's API key
// (see credentials).
func (f clientFlags) client() (*client.Client, error) {
	server, key, _, err := credentials(f.server, f.keyFile)
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(server, "http://") && !strings.HasPrefix(server, "https://") {
		return nil, usageError{fmt.Errorf("--server %q: want an http:// or https:// URL", server)}
	}
	if key == "" {
		return nil, noKeyError(server)
	}
	lc, err := client.New(server, key)
	if err != nil {
		return nil, usageError{err}
	}
	return lc, nil
}

// noKeyError says that no key goes to server, and why: nobody logged in,
// or the saved login is for another server (a mistyped --server or
// $SEMA_SERVER), whose key is never sent elsewhere.
func noKeyError(server string) error {
	if login, saved, _ := readLogin(); saved && !sameServer(login.Server, server) {
		return usageError{fmt.Errorf("no API key for %s: the saved login is for %s, and its key goes only there; "+
			"to use this server, run sema login --server %s, or set $%s", server, login.Server, server, EnvAPIKey)}
	}
	return usageError{fmt.Errorf("no API key: run sema login, set $%s, or pass --admin-key-file <data>/admin.key on the server's machine", EnvAPIKey)}
}

// addDeviceFlag is --device, as run and fs take it (see pickDevice).
func addDeviceFlag(c *cobra.Command, device *string) {
	c.Flags().StringVar(device, "device", "", "the device's id or name (default $"+EnvDevice+", else your only device)")
}

// pickDevice resolves the device of run and fs: --device (an id or a
// name), else $SEMA_DEVICE, else the caller's only device that is not
// revoked. A name several devices have is usage: the error lists their ids.
func pickDevice(ctx context.Context, lc *client.Client, id string) (api.Device, error) {
	if id == "" {
		id = os.Getenv(EnvDevice)
	}
	devs, err := lc.Devices(ctx)
	if err != nil {
		return api.Device{}, &ExitError{Code: ExitNeverStarted, Err: err} // nothing was sent
	}
	d, err := client.ChooseDevice(devs, id)
	var choose *client.ChooseError
	if !errors.As(err, &choose) {
		return d, err
	}
	switch {
	case len(choose.Ambiguous) > 0:
		return api.Device{}, usageError{choose}
	case choose.Wanted != "":
		return api.Device{}, &ExitError{Code: ExitNeverStarted, Err: fmt.Errorf("you have no device %q (see `sema devices`)", id)}
	case choose.Live == 0:
		return api.Device{}, &ExitError{Code: ExitNeverStarted, Err: errors.New("you have no enrolled device: run `sema token` and enroll one")}
	}
	return api.Device{}, usageError{fmt.Errorf("you have %s: pass --device ID or NAME (see `sema devices`)", words.Count(choose.Live, "device", "devices"))}
}

// remotePath makes p absolute on the device (client.DevicePath).
func remotePath(dev api.Device, p string) string { return client.DevicePath(dev, p) }
