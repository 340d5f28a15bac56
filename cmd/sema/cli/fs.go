package cli

import (
	"errors"
	"fmt"
	"path"
	"text/tabwriter"
	"time"

	"github.com/sema-agent/sema/internal/b64"
	"github.com/sema-agent/sema/internal/safetext"
	"github.com/spf13/cobra"
)

// maxPut bounds `sema fs put`: the lane takes 128 MiB of JSON per
// instruction, which is 96 MiB of content once base64-encoded.
const maxPut = 96 << 20

type fsFlags struct {
	client  clientFlags
	device  string
	timeout time.Duration
}

func newFSCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "fs",
		Short: "Files on a device through the lane: cat, put, ls, stat, rm, mkdir",
		Long: "fs reads and writes files on a device over the lane's file instructions. A relative path is\n" +
			"taken from the device's workspace root; ~ is never expanded.\n\n" +
			"Exit codes:\n" +
			"    0  done\n" +
			"    1  the device said no (not_found, permission_denied, is_directory, approval denied …):\n" +
			"       nothing changed\n" +
			"    2  usage (an unknown subcommand or flag included)\n" +
			"  124  timeout\n" +
			"  125  never started, nothing ran: the lane refused it, the device is offline or unknown, or\n" +
			"       nothing was sent (a missing or unreadable local file, the server unreachable)\n" +
			"  130  cancelled with Ctrl-C\n" +
			"  254  the lane cancelled the read (its output outran the lane's delivery bound)\n" +
			"  255  the outcome is unknown (outcome_unknown, a broken stream)",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return usageError{errors.New("fs needs a subcommand: cat, put, ls, stat, rm or mkdir")}
		},
	}
	c.AddCommand(
		fsVerb("cat PATH", "Write a file's bytes to standard output (readBinaryFile)", 1, nil, fsCat),
		fsVerb("put LOCAL|- PATH", "Write a local file (or standard input) to PATH on the device, atomically (writeFile)", 2, nil, fsPut),
		fsVerb("ls PATH", "List a directory (listDir)", 1, nil, fsLs),
		fsVerb("stat PATH", "Show a file's kind, size, mode and mtime (fileInfo)", 1, nil, fsStat),
		fsVerb("rm [-r] PATH", "Remove a file, or a directory tree with -r (remove)", 1, func(c *cobra.Command) {
			c.Flags().BoolP("recursive", "r", false, "remove a directory and everything in it")
		}, fsRm),
		fsVerb("mkdir [-p] PATH", "Create a directory, with its parents with -p (createDir)", 1, func(c *cobra.Command) {
			c.Flags().BoolP("parents", "p", false, "create missing parents too; no error if it exists")
		}, fsMkdir),
	)
	return c
}

// fsCall is one verb's work: it posts its instruction through run.
type fsCall struct {
	c   *cobra.Command
	api *apiClient
	dev deviceInfo
	f   *fsFlags
}

// run posts one file instruction and checks its outcome kind.
func (fc fsCall) run(kind string, args any, content []byte, want string, sink chunkSink) (outcome, error) {
	in := instruction{Kind: kind, Args: args, TimeoutMs: fc.f.timeout.Milliseconds()}
	if content != nil {
		enc := b64.EncodeToString(content)
		in.ContentB64 = &enc
	}
	if sink == nil {
		sink = func(string, []byte) error { return nil }
	}
	res, err := fc.api.instruct(fc.c.Context(), fc.dev.DeviceID, in, sink)
	if err != nil {
		return outcome{}, err
	}
	return res.Outcome, res.failure(want)
}

func fsVerb(use, short string, nargs int, flags func(*cobra.Command), do func(fc fsCall, args []string) error) *cobra.Command {
	var f fsFlags
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != nargs {
				return usageError{fmt.Errorf("usage: sema fs %s", use)}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if f.timeout < time.Millisecond {
				return usageError{fmt.Errorf("--timeout %v is too short", f.timeout)}
			}
			api, err := f.client.client()
			if err != nil {
				return nothingSent(err)
			}
			defer api.close()
			dev, err := api.pickDevice(c.Context(), f.device)
			if err != nil {
				return err
			}
			return do(fsCall{c: c, api: api, dev: dev, f: &f}, args)
		},
	}
	addClientFlags(c, &f.client)
	c.Flags().StringVar(&f.device, "device", "", "the device id (default $"+EnvDevice+", else your only device)")
	c.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "the device gives up after this")
	if flags != nil {
		flags(c)
	}
	return c
}

func fsCat(fc fsCall, args []string) error {
	_, err := fc.run("readBinaryFile", map[string]string{"path": remotePath(fc.dev, args[0])}, nil, "read",
		func(_ string, data []byte) error {
			_, err := Stdout.Write(data)
			return err
		})
	return err
}

func fsPut(fc fsCall, args []string) error {
	content, err := readLocal(args[0])
	if err != nil {
		return nothingSent(err)
	}
	o, err := fc.run("writeFile", map[string]string{"path": remotePath(fc.dev, args[1])}, content, "write", nil)
	if err != nil {
		return err
	}
	verb := "wrote"
	if o.Created != nil && *o.Created {
		verb = "created"
	}
	fmt.Fprintf(Stdout, "%s %s (%d bytes)\n", verb, safetext.String(o.CanonicalPath), len(content))
	return nil
}

// readLocal reads what `fs put` sends: the file name (or standard input
// for "-"), at most maxPut bytes.
func readLocal(name string) ([]byte, error) {
	path := name
	if name == "-" {
		path = ""
	}
	content, err := readUpTo(path, Stdin, maxPut)
	if err != nil {
		return nil, err // the os error names the file
	}
	if len(content) > maxPut {
		return nil, fmt.Errorf("%s is over %d MiB, the most one write carries", name, maxPut>>20)
	}
	return content, nil
}

func fsLs(fc fsCall, args []string) error {
	o, err := fc.run("listDir", map[string]string{"path": remotePath(fc.dev, args[0])}, nil, "stat", nil)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(Stdout, 0, 4, 2, ' ', 0)
	for _, e := range o.Entries {
		name := path.Base(e.Path)
		if e.Kind == "dir" {
			name += "/"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", modeString(e.Mode), safetext.String(e.Kind), e.Size, mtime(e.MtimeMs), safetext.String(name))
	}
	return tw.Flush()
}

func fsStat(fc fsCall, args []string) error {
	o, err := fc.run("fileInfo", map[string]string{"path": remotePath(fc.dev, args[0])}, nil, "stat", nil)
	if err != nil {
		return err
	}
	if o.Info == nil {
		return &ExitError{Code: ExitLaneFailure, Err: errors.New("the fileInfo outcome carries no info")}
	}
	i := o.Info
	fmt.Fprintf(Stdout, "path   %s\nkind   %s\nsize   %d\nmode   %s\nmtime  %s\n", safetext.String(i.Path), safetext.String(i.Kind), i.Size, modeString(i.Mode), mtime(i.MtimeMs))
	return nil
}

func fsRm(fc fsCall, args []string) error {
	rec, _ := fc.c.Flags().GetBool("recursive")
	_, err := fc.run("remove", map[string]any{"path": remotePath(fc.dev, args[0]), "recursive": rec}, nil, "void", nil)
	return err
}

func fsMkdir(fc fsCall, args []string) error {
	parents, _ := fc.c.Flags().GetBool("parents")
	_, err := fc.run("createDir", map[string]any{"path": remotePath(fc.dev, args[0]), "recursive": parents}, nil, "void", nil)
	return err
}

func modeString(m *uint32) string {
	if m == nil {
		return "-"
	}
	return fmt.Sprintf("%04o", *m&0o7777)
}

func mtime(ms int64) string { return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05") }
