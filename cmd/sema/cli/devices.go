package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/internal/words"
)

type devicesFlags struct {
	client clientFlags
	json   bool
	online bool
	all    bool
}

func newDevicesCmd() *cobra.Command {
	var f devicesFlags
	c := &cobra.Command{
		Use:   "devices [--online] [--all] [--json] [--server URL]",
		Short: "List your devices: online state, generation, work in flight",
		Long: "devices lists the devices enrolled with your API key. STATE is online (an executor holds\n" +
			"the lane now), offline, or revoked; GEN is the connection generation; INFLIGHT the\n" +
			"instructions running on it. Presence is the answering server's view. The lane answers\n" +
			"in pages (of 500); devices reads them all, oldest first. --online lists only the devices\n" +
			"connected to the answering server; revoked devices are left out unless --all (--json\n" +
			"prints every one).",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Errorf("devices takes no arguments (to revoke one: sema devices revoke ID)")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error { return runDevices(c, f) },
	}
	addClientFlags(c, &f.client)
	c.Flags().BoolVar(&f.json, "json", false, "print the lane's answer as JSON (every page in one list)")
	c.Flags().BoolVar(&f.online, "online", false, "only the devices connected to the answering server")
	c.Flags().BoolVar(&f.all, "all", false, "also the revoked devices")
	c.AddCommand(newRevokeCmd())
	c.AddCommand(newRenameCmd())
	c.AddCommand(newLaneForgetCmd())
	return c
}

func runDevices(c *cobra.Command, f devicesFlags) error {
	lc, err := f.client.client()
	if err != nil {
		return err
	}
	defer lc.Close()
	devs, err := lc.AllDevices(c.Context(), client.DevicesOptions{Online: f.online})
	if err != nil {
		return err
	}
	if f.json {
		b, _ := json.MarshalIndent(api.DeviceList{Devices: devs}, "", "  ")
		fmt.Fprintf(Stdout, "%s\n", safetext.JSON(b))
		return nil
	}
	revoked := 0
	if !f.all {
		devs = slices.DeleteFunc(devs, func(d api.Device) bool {
			if d.Revoked {
				revoked++
			}
			return d.Revoked
		})
	}
	if len(devs) == 0 && f.online {
		fmt.Fprintln(Stderr, "No device is connected to this server.")
		return nil
	}
	if len(devs) == 0 && revoked > 0 {
		fmt.Fprintf(Stderr, "No device but %s (sema devices --all shows them); `sema token` prints the line that enrolls one.\n",
			words.Count(revoked, "revoked one", "revoked ones"))
		return nil
	}
	if len(devs) == 0 {
		fmt.Fprintln(Stderr, "No devices yet: `sema token` prints the line that enrolls one.")
		return nil
	}
	tw := tabwriter.NewWriter(Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DEVICE\tNAME\tPLATFORM\tSTATE\tGEN\tINFLIGHT\tSINCE\tWORKSPACE")
	for _, d := range devs {
		state, since := "offline", "-"
		switch {
		case d.Revoked:
			state, since = "revoked", ago(d.RevokedAt)
		case d.Online:
			state, since = "online", ago(d.ConnectedSince)
		}
		platform := d.PlatformOS
		if d.PlatformArch != "" {
			platform += "/" + d.PlatformArch
		}
		// Every cell but the counts comes from the lane: escaped.
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", safetext.String(d.DeviceID), safetext.String(orDash(d.DisplayName)),
			safetext.String(platform), state, safetext.String(orDash(d.Gen)), d.Inflight, safetext.String(since), safetext.String(d.WorkspaceRoot))
	}
	return tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ago renders a wire time as a short age ("3m ago"); "-" when absent.
func ago(wire string) string {
	t, err := time.Parse(time.RFC3339Nano, wire)
	if err != nil {
		return orDash(wire)
	}
	d := time.Since(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}

func newRenameCmd() *cobra.Command {
	var f clientFlags
	c := &cobra.Command{
		Use:   "rename DEVICE NEW_NAME",
		Short: "Give a device a new name (DEVICE is its id or its current name)",
		Long: "rename changes the name `sema devices` shows and --device takes; the device's id,\n" +
			"key and connection stay as they are. Names need not be unique: --device refuses a name\n" +
			"several devices share, and lists their ids.",
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 2 || args[0] == "" {
				return usageError{errors.New("rename takes a device (id or name) and its new name")}
			}
			if args[1] == "" || len(args[1]) > 255 {
				return usageError{errors.New("a device name is 1 to 255 bytes")}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			lc, err := f.client()
			if err != nil {
				return err
			}
			defer lc.Close()
			d, err := pickDevice(c.Context(), lc, args[0])
			if err != nil {
				return err
			}
			d, err = lc.Rename(c.Context(), d.DeviceID, args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(Stdout, "renamed %s to %s\n", safetext.String(d.DeviceID), safetext.String(d.DisplayName))
			return nil
		},
	}
	addClientFlags(c, &f)
	return c
}

func newLaneForgetCmd() *cobra.Command {
	return newDeviceIDCmd("forget", "forgot", (*client.Client).Forget,
		"Remove a revoked device from the registry (its audit rows stay)",
		"forget removes a revoked device's row, the sessions bound to it and its enrollment\n"+
			"token, so that `sema devices --all` no longer lists it; the audit rows that name it stay.\n"+
			"A device that is not revoked is refused: revoke it first. The admin may forget any\n"+
			"identity's revoked device. An executor that was offline when its device was revoked, and\n"+
			"connects after it is forgotten, hears auth_failed instead of revoked: it keeps its key\n"+
			"and retries; stop it and delete its state dir.")
}

func newRevokeCmd() *cobra.Command {
	return newDeviceIDCmd("revoke", "revoked", (*client.Client).Revoke,
		"Revoke a device for good: its executor is told, stops and deletes its key",
		"revoke is terminal: the device id can never connect again (enrolling the machine again\n"+
			"yields a new id). A connected executor gets bye revoked, deletes its key and exits 3;\n"+
			"its work in flight settles outcome_unknown.")
}

// newDeviceIDCmd is a `sema devices VERB DEVICE_ID` that calls the lane
// once and says "DONE id".
func newDeviceIDCmd(verb, done string, call func(*client.Client, context.Context, string) (api.Device, error), short, long string) *cobra.Command {
	var f clientFlags
	c := &cobra.Command{
		Use:   verb + " DEVICE_ID",
		Short: short,
		Long:  long,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageError{fmt.Errorf("%s takes one device id", verb)}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			lc, err := f.client()
			if err != nil {
				return err
			}
			defer lc.Close()
			d, err := call(lc, c.Context(), args[0])
			if errors.Is(err, client.ErrDeviceNotFound) {
				return nameNotID(c.Context(), lc, verb, args[0], err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(Stdout, "%s %s\n", done, safetext.String(d.DeviceID))
			return nil
		},
	}
	addClientFlags(c, &f)
	return c
}

// nameNotID turns the lane's device.not_found for arg into a usage error
// naming the ids when arg is the name of the caller's devices: the verb
// takes an id, and "no device" would be untrue. Otherwise notFound stays.
func nameNotID(ctx context.Context, lc *client.Client, verb, arg string, notFound error) error {
	devs, err := lc.Devices(ctx)
	if err != nil {
		return notFound
	}
	var ids []string
	for _, d := range devs {
		if d.DisplayName == arg {
			ids = append(ids, d.DeviceID)
		}
	}
	if len(ids) == 0 {
		return notFound
	}
	next := fmt.Sprintf("sema devices %s %s", verb, ids[0])
	if len(ids) > 1 {
		next = "sema devices --all tells them apart"
	}
	return usageError{fmt.Errorf("%s takes a device id: %q is the name of %s (%s)", verb, arg, strings.Join(ids, ", "), next)}
}
