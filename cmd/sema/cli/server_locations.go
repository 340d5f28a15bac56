package cli

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"github.com/sema-agent/sema/lane"
)

// advertiseURL is where the other replicas on the same PostgreSQL reach
// this one: --advertise-url, or the listen address, with the
// host's name in place of an address that means every interface. A server
// on SQLite is the only replica (its data dir is locked) and has none.
func advertiseURL(f *serverFlags, scheme string, addr net.Addr) (string, error) {
	if f.postgres == "" {
		if f.advertiseURL != "" {
			return "", usageError{errors.New("--advertise-url needs --postgres: a server on SQLite is the only replica of its registry")}
		}
		return "", nil
	}
	if f.advertiseURL != "" {
		if lane.CheckAdvertiseURL(f.advertiseURL) != nil {
			return "", usageError{fmt.Errorf("--advertise-url %q: want http(s)://host[:port]", f.advertiseURL)}
		}
		return f.advertiseURL, nil
	}
	u, err := namedURL(scheme, addr)
	if err != nil {
		return "", fmt.Errorf("--listen %s: %w: give --advertise-url", f.listen, err)
	}
	return u, nil
}

// namedURL is the URL of the listen address addr, with the host's name in
// place of an address that means every interface, which no other machine
// can dial.
func namedURL(scheme string, addr net.Addr) (string, error) {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "", fmt.Errorf("the listen address %s: %w", addr, err)
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		if host, err = os.Hostname(); err != nil {
			return "", fmt.Errorf("it is every address and the host's name is unknown (%v)", err)
		}
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}

// serverDataDir resolves --data, $SEMA_DATA_DIR, or the OS config dir +
// /sema/server.
func serverDataDir(flag string) (string, error) {
	dir := flag
	if dir == "" {
		dir = os.Getenv(EnvDataDir)
	}
	if dir == "" {
		base, err := os.UserConfigDir()
		if err != nil {
			return "", fmt.Errorf("no data dir: pass --data or set %s (%v)", EnvDataDir, err)
		}
		dir = filepath.Join(base, "sema", "server")
	}
	return filepath.Abs(dir)
}
