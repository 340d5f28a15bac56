package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/nexting"
)

// `sema nexting …`: tools for the approval device's wire protocol
// (docs/nexting.md, "CLI"). validate and devinfo here, sim in
// nexting_sim.go.

// nextingNoArgs refuses positional arguments as a usage error (exit 2).
func nextingNoArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageError{fmt.Errorf("%s takes no arguments", c.CommandPath())}
	}
	return nil
}

func newNextingCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "nexting",
		Short: "Check nexting wire traffic and Device Info, and simulate an approval device",
		Args:  nextingNoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return usageError{errors.New("nexting needs a subcommand: validate, devinfo or sim")}
		},
	}
	c.AddCommand(newNextingValidateCmd(), newNextingDevinfoCmd(), newNextingSimCmd())
	return c
}

type validateFlags struct {
	deviceInfo string
}

func newNextingValidateCmd() *cobra.Command {
	var f validateFlags
	c := &cobra.Command{
		Use:   "validate [--device-info FILE] < FRAMES",
		Short: "Validate an LF-framed nexting byte stream, one JSON verdict per frame",
		Long: "validate reads a byte stream of nexting frames on stdin and prints one line per complete frame:\n" +
			`{"ok":true,"t":"<type>"} or {"ok":false,"code":"<code>"}, the code from the wire error set.` + "\n" +
			"A trailing partial frame (no LF) prints nothing. Without --device-info every profile counts as\n" +
			"negotiated and frames may be 4096 bytes; with it, the profiles and limits a host implementing every\n" +
			"profile negotiates with that device apply. Exit 0 when every frame was accepted, 1 otherwise.",
		Args: nextingNoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runValidate(f) },
	}
	c.Flags().StringVar(&f.deviceInfo, "device-info", "", "a file holding the device's Device Info value")
	return c
}

// verdict is one output line of validate.
type verdict struct {
	OK   bool         `json:"ok"`
	T    nexting.Type `json:"t,omitempty"`
	Code nexting.Code `json:"code,omitempty"`
}

func runValidate(f validateFlags) error {
	decode := nexting.Decode
	framer, _ := nexting.NewFramer(nexting.MaxFrameBytes)
	if f.deviceInfo != "" {
		neg, err := negotiateFile(f.deviceInfo)
		if err != nil {
			return err
		}
		decode, framer = neg.Decode, neg.NewFramer()
	}
	// Each line (through its LF) yields exactly one Result, but an error can
	// come before the LF that completes its line: results wait until their
	// line is complete, and those of a trailing partial line are dropped.
	var (
		held     []nexting.Result
		complete int // lines whose LF was fed
		refused  bool
	)
	out := json.NewEncoder(Stdout)
	emit := func() error {
		for len(held) > 0 && complete > 0 {
			v := verdict{OK: true}
			r := held[0]
			held, complete = held[1:], complete-1
			if r.Err != nil {
				v = verdict{Code: r.Err.Code}
			} else if m, err := decode(r.Frame); err != nil {
				v = verdict{Code: nexting.CodeOf(err)}
			} else {
				v.T = m.Type()
			}
			refused = refused || !v.OK
			if err := out.Encode(v); err != nil {
				return err
			}
		}
		return nil
	}
	buf := make([]byte, 32<<10)
	for {
		n, rerr := Stdin.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			part := chunk
			if i >= 0 {
				part = chunk[:i+1]
			}
			held = append(held, framer.Feed(part)...)
			if i >= 0 {
				complete++
			}
			chunk = chunk[len(part):]
			if err := emit(); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("reading stdin: %w", rerr)
		}
	}
	if refused {
		return &ExitError{Code: ExitFailure, Err: errors.New("some frames were refused")}
	}
	return nil
}

// negotiateFile reads a Device Info file and negotiates it against a host
// that implements every profile.
func negotiateFile(path string) (*nexting.Negotiated, error) {
	raw, err := readLimited(path, nil)
	if err != nil {
		return nil, err
	}
	info, err := nexting.ParseDeviceInfo(bytes.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nexting.Negotiate(nexting.DefaultHostConfig(), info)
}

// readLimited reads a Device Info value from path (or r when path is ""),
// at most one byte more than ParseDeviceInfo accepts.
func readLimited(path string, r io.Reader) ([]byte, error) {
	return readUpTo(path, r, nexting.MaxDeviceInfoBytes)
}

// readUpTo reads path (or r when path is ""), at most max+1 bytes, so that
// the caller can tell "too long" from "exactly max".
func readUpTo(path string, r io.Reader, max int64) ([]byte, error) {
	if path != "" {
		fh, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer fh.Close()
		r = fh
	}
	return io.ReadAll(io.LimitReader(r, max+1))
}

func newNextingDevinfoCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "devinfo < FILE",
		Short: "Validate a Device Info value and print what a host negotiates with it",
		Long: "devinfo reads one Device Info value on stdin (the GATT characteristic's content, not framed;\n" +
			"surrounding white space is allowed) and prints\n" +
			`{"ok":true,"profiles":[...],"statusSlots":N,"maxMessageBytes":N}` + "\n" +
			"— the profiles, status slots and frame limit a host implementing every profile negotiates with it —\n" +
			`or {"ok":false,"error":"..."} (exit 1).`,
		Args: nextingNoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runDevinfo() },
	}
}

type devinfoOK struct {
	OK              bool              `json:"ok"`
	Profiles        []nexting.Profile `json:"profiles"`
	StatusSlots     int               `json:"statusSlots"`
	MaxMessageBytes int               `json:"maxMessageBytes"`
}

type devinfoErr struct {
	OK    bool   `json:"ok"`
	Error string `json:"error"`
}

func runDevinfo() error {
	raw, err := readLimited("", Stdin)
	if err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	out := json.NewEncoder(Stdout)
	out.SetEscapeHTML(false)
	info, err := nexting.ParseDeviceInfo(bytes.TrimSpace(raw))
	var neg *nexting.Negotiated
	if err == nil {
		neg, err = nexting.Negotiate(nexting.DefaultHostConfig(), info)
	}
	if err != nil {
		if werr := out.Encode(devinfoErr{Error: err.Error()}); werr != nil {
			return werr
		}
		return &ExitError{Code: ExitFailure, Err: errors.New("the Device Info value is not valid")}
	}
	return out.Encode(devinfoOK{OK: true, Profiles: neg.Profiles(), StatusSlots: neg.StatusSlots(), MaxMessageBytes: neg.MaxMessageBytes()})
}
