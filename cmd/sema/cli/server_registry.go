package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/sema-agent/sema/internal/atomicfile"
	"github.com/sema-agent/sema/lane"
	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/postgres"
	"github.com/sema-agent/sema/lane/store/sqlite"
)

// AdminKeyFile is the file in the data dir that holds the first identity's
// API key, for local use (mode 0600).
const AdminKeyFile = "admin.key"

// eventAdminCreated is the audit row that records the first start: it
// lives in the registry, so it holds for SQLite and PostgreSQL alike.
const eventAdminCreated = "server.admin_created"

// openStore opens the registry: PostgreSQL when url is set, else SQLite in
// dir. The URL is never logged (it may carry a password).
func openStore(ctx context.Context, dir, pgURL string) (store.Store, string, error) {
	if pgURL != "" {
		st, err := postgres.Open(ctx, pgURL)
		if err != nil {
			return nil, "", fmt.Errorf("opening the PostgreSQL registry: %w", err)
		}
		return st, "postgres", nil
	}
	st, err := sqlite.Open(ctx, dir)
	if err != nil {
		return nil, "", err
	}
	return st, "sqlite", nil
}

// takeBackLeases drops the leases a registry that this process alone serves
// (SQLite, whose data dir it has locked) still records: they are a dead
// process's (a kill -9, a crash), and kept they would refuse its devices
// already_connected until they expired, about a minute.
func takeBackLeases(ctx context.Context, st store.Store, log *slog.Logger) error {
	one, ok := st.(interface {
		DeviceRevocations() (uint64, bool)
		ReleaseAllLeases(context.Context) (int64, error)
	})
	if !ok {
		return nil
	}
	if _, alone := one.DeviceRevocations(); !alone {
		return nil
	}
	n, err := one.ReleaseAllLeases(ctx)
	if err != nil {
		return fmt.Errorf("taking back the leases of the process that served this data dir before: %w", err)
	}
	if n > 0 {
		log.Info("took back the leases of the process that served this data dir before", "leases", n)
	}
	return nil
}

// ensureAdmin creates the admin identity on the registry's first start:
// its API key is written to <dir>/admin.key (0600) and printed once, on
// Stdout, never logged. A registry that has one already prints nothing.
func ensureAdmin(ctx context.Context, st store.Store, dir, public string, log *slog.Logger) error {
	rows, err := st.AuditEvents(ctx, store.AuditFilter{Event: eventAdminCreated, Limit: 1})
	if err != nil {
		return fmt.Errorf("reading the registry: %w", err)
	}
	keyPath := filepath.Join(dir, AdminKeyFile)
	if len(rows) > 0 {
		if _, err := os.Stat(keyPath); err != nil {
			log.Warn("admin identity exists, but its key file is gone; the key was shown once at the first start",
				"identity", rows[0].IdentityID, "key_file", keyPath)
			return nil
		}
		log.Info("admin identity exists", "identity", rows[0].IdentityID, "key_file", keyPath)
		return nil
	}
	idn, key, err := lane.CreateAdminIdentity(ctx, st, "admin")
	if errors.Is(err, store.ErrAdminExists) {
		// Another replica on the same registry made it at this very moment;
		// its key is in that replica's data dir.
		log.Info("admin identity exists: another replica created it as this one started")
		return nil
	}
	if err != nil {
		return err
	}
	if err := atomicfile.Write(keyPath, []byte(key+"\n"), 0o600); err != nil {
		return fmt.Errorf("writing the admin key: %w", err)
	}
	if err := st.Audit(ctx, store.AuditEvent{IdentityID: idn.ID, Event: eventAdminCreated}); err != nil {
		return fmt.Errorf("recording the first start: %w", err)
	}
	log.Info("first start: created the admin identity", "identity", idn.ID, "key_file", keyPath)
	fmt.Fprintf(Stdout, "First start: created the admin identity. Its API key, shown this once:\n\n    %s\n\n"+
		"It is also in %s (mode 0600). Log in with it, then issue a device's enroll line:\n\n"+
		"    sema login --server %s < %s\n    sema token\n\n",
		key, keyPath, public, shellQuote(keyPath))
	return nil
}
