package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/sema-agent/sema/client"
	"github.com/sema-agent/sema/internal/atomicfile"
	"github.com/sema-agent/sema/internal/safetext"
	"github.com/sema-agent/sema/internal/words"
)

// The saved login: a lane's URL and an API key, in the user's config dir
// (os.UserConfigDir()/sema/login.json, 0600 in a 0700 dir), as gh keeps
// its hosts. A device's sandboxed commands never see that dir. Flags and
// the SEMA_ variables win over it; its key goes only to its own server.

// LoginFile is the saved login's file name in ConfigDir.
const LoginFile = "login.json"

// savedLogin is the content of LoginFile.
type savedLogin struct {
	Server string `json:"server"`
	APIKey string `json:"apiKey"`
}

// configDir is sema's directory in the user's config dir.
func configDir() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("finding your config dir: %w", err)
	}
	return filepath.Join(dir, "sema"), nil
}

// readLogin is the saved login; ok is false when there is none.
func readLogin() (l savedLogin, ok bool, err error) {
	dir, err := configDir()
	if err != nil {
		return l, false, err
	}
	b, err := os.ReadFile(filepath.Join(dir, LoginFile))
	if errors.Is(err, fs.ErrNotExist) {
		return l, false, nil
	}
	if err == nil {
		err = json.Unmarshal(b, &l)
	}
	if err != nil || l.Server == "" || l.APIKey == "" {
		return l, false, fmt.Errorf("reading the saved login %s: %v (sema logout removes it)", filepath.Join(dir, LoginFile), err)
	}
	return l, true, nil
}

// credentials are the lane's URL and the API key a user command uses, and
// where the key came from (for whoami): --server, else $SEMA_SERVER, else
// the saved login's, else DefaultServer; --admin-key-file, else
// $SEMA_API_KEY, else the saved login's key when the server is its own.
func credentials(serverFlag, keyFile string) (server, key, source string, err error) {
	login, saved, loginErr := readLogin()
	server = serverFlag
	for _, s := range []string{os.Getenv(EnvServer), login.Server, DefaultServer} {
		if server == "" {
			server = s
		}
	}
	switch {
	case keyFile != "":
		b, err := os.ReadFile(keyFile)
		if err != nil {
			return server, "", "", fmt.Errorf("reading the API key: %w", err)
		}
		return server, strings.TrimSpace(string(b)), keyFile, nil
	case os.Getenv(EnvAPIKey) != "":
		return server, os.Getenv(EnvAPIKey), "$" + EnvAPIKey, nil
	case loginErr != nil:
		return server, "", "", loginErr
	case saved && sameServer(login.Server, server):
		return server, login.APIKey, "the saved login", nil
	}
	return server, "", "", nil
}

// sameServer compares two lane URLs as the client takes them.
func sameServer(a, b string) bool { return strings.TrimRight(a, "/") == strings.TrimRight(b, "/") }

type loginFlags struct{ server string }

func newLoginCmd() *cobra.Command {
	var f loginFlags
	c := &cobra.Command{
		Use:   "login [--server URL]",
		Short: "Save a lane's URL and your API key, so that the other commands need neither",
		Long: "login reads your API key from standard input when it is not a terminal (sema login < key.txt),\n" +
			"else asks for it without echo, checks it against the lane, and saves the URL and the key in\n" +
			"your config dir (" + filepath.Join("<config>", "sema", LoginFile) + ", mode 0600). The other commands use them\n" +
			"unless --server, --admin-key-file, $" + EnvServer + " or $" + EnvAPIKey + " say otherwise; the key goes only to\n" +
			"the server it was saved for. sema logout removes it.",
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error { return runLogin(c, f) },
	}
	addServerFlag(c, &f.server)
	return c
}

func runLogin(c *cobra.Command, f loginFlags) error {
	server := serverURL(f.server)
	key, err := readKey(c.Context())
	if err != nil {
		return err
	}
	lc, err := client.New(server, key)
	if err != nil {
		return usageError{err}
	}
	defer lc.Close()
	// An authenticated read any identity may make proves the key.
	if _, err := lc.APIKeys(c.Context()); err != nil {
		if ue := (*client.UnreachableError)(nil); errors.As(err, &ue) {
			return err // the key never reached a lane; the error names it
		}
		return fmt.Errorf("the lane at %s did not take the key: %w", server, err)
	}
	dir, err := configDir()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(savedLogin{Server: lc.BaseURL(), APIKey: key})
	if err := atomicfile.Write(filepath.Join(dir, LoginFile), b, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(Stderr, "Logged in to %s (saved in %s).\n", safetext.String(lc.BaseURL()), filepath.Join(dir, LoginFile))
	return nil
}

// readKey reads the API key: the first line of standard input when it is
// not a terminal, else typed at a prompt without echo.
func readKey(ctx context.Context) (string, error) {
	var key string
	if f, ok := Stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(Stderr, "API key: ")
		b, err := readPassword(ctx, int(f.Fd()))
		fmt.Fprintln(Stderr)
		if err != nil {
			return "", err
		}
		key = string(b)
	} else {
		line, err := bufio.NewReader(Stdin).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return "", fmt.Errorf("reading the API key from standard input: %w", err)
		}
		key = line
	}
	if key = strings.TrimSpace(key); key == "" {
		return "", usageError{errors.New("no API key given")}
	}
	return key, nil
}

// readPassword reads a line from the terminal fd without echo, until ctx
// ends (Ctrl-C: the CLI's ctx catches SIGINT, so the read alone would
// hold on). Then the terminal gets its echo back and the read is left to
// the process's exit, which follows.
func readPassword(ctx context.Context, fd int) ([]byte, error) {
	state, err := term.GetState(fd)
	if err != nil {
		return nil, fmt.Errorf("reading the API key: %w", err)
	}
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := term.ReadPassword(fd)
		done <- read{b, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return nil, fmt.Errorf("reading the API key: %w", r.err)
		}
		return r.b, nil
	case <-ctx.Done():
		term.Restore(fd, state)
		return nil, &ExitError{Code: ExitCancelled, Err: errors.New("login cancelled: nothing was saved")}
	}
}

func newLogoutCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "logout",
		Short: "Remove the saved login",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			dir, err := configDir()
			if err != nil {
				return err
			}
			err = os.Remove(filepath.Join(dir, LoginFile))
			switch {
			case errors.Is(err, fs.ErrNotExist):
				fmt.Fprintln(Stderr, "Not logged in.")
				return nil
			case err != nil:
				return err
			}
			fmt.Fprintln(Stderr, "Logged out: the saved login is removed.")
			return nil
		},
	}
}

type whoamiFlags struct {
	client clientFlags
	json   bool
}

// whoami is what `sema whoami --json` prints.
type whoami struct {
	Server     string `json:"server"`
	KeyFrom    string `json:"keyFrom"`
	Admin      bool   `json:"admin"`
	Identity   string `json:"identity"`   // the identity's name
	IdentityID string `json:"identityId"` // idn_…
	APIKeys    int    `json:"apiKeys"`    // the identity's keys that are not revoked
	Devices    int    `json:"devices"`    // its devices that are not revoked
}

func newWhoamiCmd() *cobra.Command {
	var f whoamiFlags
	c := &cobra.Command{
		Use:   "whoami [--json]",
		Short: "Say which lane and which key the commands use, and what the key may do",
		Args:  cobra.NoArgs,
		RunE:  func(c *cobra.Command, args []string) error { return runWhoami(c, f) },
	}
	addClientFlags(c, &f.client)
	c.Flags().BoolVar(&f.json, "json", false, "print it as JSON")
	return c
}

func runWhoami(c *cobra.Command, f whoamiFlags) error {
	_, _, source, err := credentials(f.client.server, f.client.keyFile)
	if err != nil {
		return err
	}
	lc, err := f.client.client()
	if err != nil {
		return err
	}
	defer lc.Close()
	ctx := c.Context()
	w := whoami{Server: lc.BaseURL(), KeyFrom: source}
	keys, err := lc.APIKeys(ctx)
	if err != nil {
		return err
	}
	w.APIKeys = len(keys)
	devs, err := lc.Devices(ctx)
	if err != nil {
		return err
	}
	for _, d := range devs {
		if !d.Revoked {
			w.Devices++
		}
	}
	me, err := lc.WhoAmI(ctx)
	if err != nil {
		return err
	}
	w.Identity, w.IdentityID, w.Admin = me.Name, me.IdentityID, me.Admin
	if f.json {
		printAnswerJSON(w)
		return nil
	}
	who := fmt.Sprintf("%q (%s)", safetext.String(w.Identity), safetext.String(w.IdentityID))
	if w.Admin {
		who = fmt.Sprintf("%q, the admin identity", safetext.String(w.Identity))
	}
	fmt.Fprintf(Stdout, "%s as %s (key from %s): %s, %s\n", safetext.String(w.Server), who, safetext.String(w.KeyFrom),
		words.Count(w.APIKeys, "API key", "API keys"), words.Count(w.Devices, "device", "devices"))
	return nil
}
