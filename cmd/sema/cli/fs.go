package cli

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/b64"
	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/internal/words"
	"github.com/sema-agent/sema/protocol"
)

type fsFlags struct {
	client  clientFlags
	device  string
	timeout time.Duration
}

func newFSCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "fs",
		Short: "Files on a device through the lane: cat, get, put, ls, stat, rm, mkdir",
		Long: "fs reads and writes files on a device over the lane's file instructions. A relative path is\n" +
			"taken from the device's workspace root; ~ is never expanded. put and get move files of any size\n" +
			"as a stream, and show their progress when stderr is a terminal.\n\n" +
			"Exit codes:\n" +
			"    0  done\n" +
			"    1  the device said no (not_found, permission_denied, is_directory, approval denied …):\n" +
			"       nothing changed; or put wrote a new file but could not set its executable bits\n" +
			"    2  usage (an unknown subcommand or flag included)\n" +
			"  124  timeout\n" +
			"  125  never started, nothing ran: the lane refused it, the device is offline or unknown, or\n" +
			"       nothing was sent (a missing or unreadable local file, the server unreachable)\n" +
			"  130  cancelled with Ctrl-C\n" +
			"  254  the lane cancelled the read (its output outran the lane's delivery bound)\n" +
			"  255  the outcome is unknown (outcome_unknown, a broken stream, a connection that broke after the\n" +
			"       request was sent)",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return usageError{errors.New("fs needs a subcommand: cat, get, put, ls, stat, rm or mkdir")}
		},
	}
	c.AddCommand(
		fsVerb("cat PATH", "Write a file's bytes to standard output as they come (readBinaryFile)", 1, 1, nil, fsCat),
		fsVerb("get [-r] PATH [LOCAL|-]", getShort, 1, 2, func(c *cobra.Command) {
			c.Flags().BoolP("recursive", "r", false, "copy a directory and everything in it, file by file")
		}, fsGet),
		fsVerb("put [-p] [-r] LOCAL|- PATH", putShort, 2, 2, func(c *cobra.Command) {
			c.Flags().BoolP("parents", "p", false, "create PATH's missing parent directories")
			c.Flags().BoolP("recursive", "r", false, "copy a directory and everything in it, file by file")
		}, fsPut),
		fsVerb("ls [-l] [--json] [PATH]", "List a directory, the workspace root by default (listDir)", 0, 1, func(c *cobra.Command) {
			c.Flags().BoolP("long", "l", false, "show each entry's mode, kind, size and mtime")
			c.Flags().Bool("json", false, "print the entries as JSON")
		}, fsLs),
		fsVerb("stat [--json] PATH", "Show a file's kind, size, mode and mtime (fileInfo)", 1, 1, func(c *cobra.Command) {
			c.Flags().Bool("json", false, "print it as JSON")
		}, fsStat),
		fsVerb("rm [-r] PATH…", "Remove files, or directory trees with -r (remove)", 1, manyArgs, func(c *cobra.Command) {
			c.Flags().BoolP("recursive", "r", false, "remove a directory and everything in it")
		}, fsRm),
		fsVerb("mkdir [-p] PATH…", "Create directories, with their parents with -p (createDir)", 1, manyArgs, func(c *cobra.Command) {
			c.Flags().BoolP("parents", "p", false, "create missing parents too; no error if it exists")
		}, fsMkdir),
	)
	return c
}

// manyArgs is a verb's maxArgs when it takes any number of paths.
const manyArgs = -1

// fsCall is one verb's work: it posts its instruction through run.
type fsCall struct {
	c   *cobra.Command
	lc  *client.Client
	dev api.Device
	f   *fsFlags
}

// run posts one file instruction and checks its outcome kind. content,
// when not nil, goes as contentB64 (small writes: quickstart's).
func (fc fsCall) run(kind protocol.InstructionKind, args any, content []byte, want protocol.OutcomeKind, sink chunkSink) (api.Outcome, error) {
	return fc.runFor(fc.f.timeout, kind, args, content, want, sink)
}

// transferTimeout is the device's limit for moving size bytes: --timeout
// when it was given, else its default plus a second per MiB, so that a
// large file over a slow link is not cut at 30 s (scp has no limit).
func (fc fsCall) transferTimeout(size int64) time.Duration {
	if fc.c.Flags().Changed("timeout") {
		return fc.f.timeout
	}
	return fc.f.timeout + time.Duration(size>>20)*time.Second
}

// runFor is run with the device's limit for this instruction.
func (fc fsCall) runFor(timeout time.Duration, kind protocol.InstructionKind, args any, content []byte, want protocol.OutcomeKind, sink chunkSink) (api.Outcome, error) {
	in := api.InstructionRequest{Kind: kind, Args: args, TimeoutMs: timeout.Milliseconds()}
	if content != nil {
		enc := b64.EncodeToString(content)
		in.ContentB64 = &enc
	}
	res, err := instruct(fc.c.Context(), fc.lc, fc.dev.DeviceID, in, client.Sink{Chunk: sink})
	if err != nil {
		return api.Outcome{}, err
	}
	return res.Outcome, failure(res, want)
}

func fsVerb(use, short string, minArgs, maxArgs int, flags func(*cobra.Command), do func(fc fsCall, args []string) error) *cobra.Command {
	var f fsFlags
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) < minArgs || (maxArgs != manyArgs && len(args) > maxArgs) {
				return usageError{fmt.Errorf("usage: sema fs %s", use)}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if f.timeout < time.Millisecond {
				return usageError{fmt.Errorf("--timeout %v is too short", f.timeout)}
			}
			lc, err := f.client.client()
			if err != nil {
				return nothingSent(err)
			}
			defer lc.Close()
			dev, err := pickDevice(c.Context(), lc, f.device)
			if err != nil {
				return err
			}
			return tildeNote(do(fsCall{c: c, lc: lc, dev: dev, f: &f}, args), args...)
		},
	}
	addClientFlags(c, &f.client)
	addDeviceFlag(c, &f.device)
	c.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "the device gives up after this (put and get: this plus 1s per MiB of the file, unless given)")
	if flags != nil {
		flags(c)
	}
	return c
}

// tildeNote adds to a not_found for a path that starts with ~ (quoted,
// or no local shell would have left it) that the device does not expand
// it: it named a directory "~" under the workspace root.
func tildeNote(err error, paths ...string) error {
	var ee *ExitError
	if !errors.As(err, &ee) || !strings.HasPrefix(ee.Err.Error(), string(protocol.ErrNotFound)+":") {
		return err
	}
	for _, p := range paths {
		if p == "~" || strings.HasPrefix(p, "~/") {
			return &ExitError{Code: ee.Code, Quiet: ee.Quiet, Err: fmt.Errorf("%w (~ is not expanded on the device: a relative path starts at its workspace root)", ee.Err)}
		}
	}
	return err
}

func fsCat(fc fsCall, args []string) error {
	// Each chunk goes to stdout as it comes: nothing holds the file.
	_, err := fc.run(protocol.KindReadBinaryFile, protocol.PathArgs{Path: remotePath(fc.dev, args[0])}, nil, protocol.OutcomeRead,
		func(_ protocol.ChunkKind, data []byte) error {
			_, err := Stdout.Write(data)
			return err
		})
	return err
}

func fsLs(fc fsCall, args []string) error {
	dir := "."
	if len(args) == 1 {
		dir = args[0]
	}
	o, err := fc.run(protocol.KindListDir, protocol.PathArgs{Path: remotePath(fc.dev, dir)}, nil, protocol.OutcomeStat, nil)
	if err != nil {
		return err
	}
	if asJSON, _ := fc.c.Flags().GetBool("json"); asJSON {
		entries := o.Entries
		if entries == nil {
			entries = []protocol.FileInfo{}
		}
		printAnswerJSON(struct {
			Path    string              `json:"path"`
			Entries []protocol.FileInfo `json:"entries"`
		}{remotePath(fc.dev, dir), entries})
		return nil
	}
	long, _ := fc.c.Flags().GetBool("long")
	tw := tabwriter.NewWriter(Stdout, 0, 4, 2, ' ', 0)
	for _, e := range o.Entries {
		name := path.Base(e.Path)
		if e.Kind == "dir" {
			name += "/"
		}
		if !long {
			fmt.Fprintln(tw, safetext.String(name))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", modeString(e.Mode), safetext.String(string(e.Kind)), e.Size, mtime(e.MtimeMs), safetext.String(name))
	}
	return tw.Flush()
}

func fsStat(fc fsCall, args []string) error {
	o, err := fc.run(protocol.KindFileInfo, protocol.PathArgs{Path: remotePath(fc.dev, args[0])}, nil, protocol.OutcomeStat, nil)
	if err != nil {
		return err
	}
	if o.Info == nil {
		return &ExitError{Code: ExitLaneFailure, Err: errors.New("the fileInfo outcome carries no info")}
	}
	i := o.Info
	if asJSON, _ := fc.c.Flags().GetBool("json"); asJSON {
		printAnswerJSON(i)
		return nil
	}
	fmt.Fprintf(Stdout, "path   %s\nkind   %s\nsize   %d\nmode   %s\nmtime  %s\n", safetext.String(i.Path), safetext.String(string(i.Kind)), i.Size, modeString(i.Mode), mtime(i.MtimeMs))
	return nil
}

func fsRm(fc fsCall, args []string) error {
	rec, _ := fc.c.Flags().GetBool("recursive")
	return eachPath(args, func(p string) error {
		_, err := fc.run(protocol.KindRemove, protocol.DirArgs{Path: remotePath(fc.dev, p), Recursive: &rec}, nil, protocol.OutcomeVoid, nil)
		return err
	})
}

func fsMkdir(fc fsCall, args []string) error {
	parents, _ := fc.c.Flags().GetBool("parents")
	return eachPath(args, func(p string) error {
		_, err := fc.run(protocol.KindCreateDir, protocol.DirArgs{Path: remotePath(fc.dev, p), Recursive: &parents}, nil, protocol.OutcomeVoid, nil)
		return err
	})
}

// eachPath does one path after the other, as rm and mkdir do: a path the
// device says no to is reported and the rest still done (exit 1 at the
// end); any other failure (the lane's, a timeout, Ctrl-C) stops there.
func eachPath(paths []string, do func(p string) error) error {
	refused := 0
	for _, p := range paths {
		err := do(p)
		var ee *ExitError
		switch {
		case err == nil:
			continue
		case len(paths) == 1 || !errors.As(err, &ee) || ee.Code != ExitFailure:
			return err
		}
		refused++
		fmt.Fprintln(Stderr, "sema:", safetext.String(err.Error()))
	}
	if refused > 0 {
		return &ExitError{Code: ExitFailure, Err: fmt.Errorf("the device refused %d of %s", refused, words.Count(len(paths), "path", "paths")), Quiet: true}
	}
	return nil
}

func modeString(m *uint32) string {
	if m == nil {
		return "-"
	}
	return fmt.Sprintf("%04o", *m&0o7777)
}

func mtime(ms int64) string { return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05") }
