package sqlite_test

import (
	"bytes"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sema-agent/sema/lane/store"
	"github.com/sema-agent/sema/lane/store/sqlite"
	"github.com/sema-agent/sema/lane/store/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Backend {
		s, err := sqlite.Open(t.Context(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// The embedded default: one file in the data dir, created on first start,
// in WAL mode, owner-only, migrated once.
func TestOpenCreatesOneWALFileAndMigratesOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	var mode string
	if err := s.DB().QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	v1, err := s.SchemaVersion(t.Context())
	if err != nil || v1 < 1 {
		t.Fatalf("schema version %d, %v", v1, err)
	}
	if _, err := s.CreateIdentity(t.Context(), "alice"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	info, err := os.Stat(filepath.Join(dir, sqlite.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("database file mode %v, want 0600", info.Mode().Perm())
	}
	s, err = sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	v2, _ := s.SchemaVersion(t.Context())
	var n int
	s.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM schema_migrations").Scan(&n)
	var idents int
	s.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM identities").Scan(&idents)
	if v2 != v1 || n != int(v1) || idents != 1 {
		t.Fatalf("after reopen: version %d (was %d), %d migration rows, %d identities", v2, v1, n, idents)
	}
}

func TestDatabaseFileNeverHoldsAPlaintextToken(t *testing.T) {
	dir := t.TempDir()
	s, err := sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	// The conformance suite checks every row; this checks the bytes on disk,
	// WAL included, after a checkpoint.
	idn, _ := s.CreateIdentity(t.Context(), "alice")
	const token = "set_PLAINTEXT_MARKER_TOKEN"
	if _, err := s.CreateEnrollToken(t.Context(), idn.ID, store.DigestOf(token), 0); err != nil {
		t.Fatal(err)
	}
	s.DB().ExecContext(t.Context(), "PRAGMA wal_checkpoint(TRUNCATE)")
	s.Close()
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		if bytes.Contains(b, []byte("PLAINTEXT_MARKER")) {
			t.Errorf("%s contains the token in plaintext", e.Name())
		}
	}
}

func TestUpgradeFromVersion3(t *testing.T) {
	storetest.UpgradeFromVersion3(t, os.DirFS("migrations"), sqlite.Dialect, func(t *testing.T) storetest.Legacy {
		dir := t.TempDir()
		raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.FileName)+"?_pragma=foreign_keys(1)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { raw.Close() })
		return storetest.Legacy{Raw: raw, Open: func(t *testing.T) storetest.Backend {
			s, err := sqlite.Open(t.Context(), dir)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}}
	})
}

// The registry of one process remembers the keys it authenticated: a second
// request reads nothing. A revocation through the store is seen at once
// (the conformance suite's ARevokedKeyIsRefusedAtOnce); a row deleted
// behind its back is seen once the store is told to forget.
func TestAuthenticatedKeysAreAnsweredFromMemory(t *testing.T) {
	ctx := t.Context()
	s, err := sqlite.Open(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	idn, err := s.CreateIdentity(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	d := store.DigestOf("sema_k_test")
	if _, err := s.CreateAPIKey(ctx, idn.ID, d); err != nil {
		t.Fatal(err)
	}
	if got, err := s.IdentityByAPIKey(ctx, d); err != nil || got.ID != idn.ID {
		t.Fatalf("first use: %+v, %v", got, err)
	}
	if _, err := s.DB().ExecContext(ctx, `DELETE FROM api_keys`); err != nil {
		t.Fatal(err)
	}
	if got, err := s.IdentityByAPIKey(ctx, d); err != nil || got.ID != idn.ID {
		t.Fatalf("second use read the registry: %+v, %v", got, err)
	}
	s.ForgetAPIKeys()
	if _, err := s.IdentityByAPIKey(ctx, d); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after ForgetAPIKeys: %v; want ErrNotFound", err)
	}
}

// Every file the registry makes in its data dir is 0600 while it runs,
// whatever the dir's mode and the umask: the WAL and shared-memory files
// take the database file's mode.
func TestEveryFileOfTheRegistryIsPrivate(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	s, err := sqlite.Open(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entries, _ := os.ReadDir(dir)
	if len(entries) < 2 {
		t.Fatalf("the registry made %d files; want the database and its WAL", len(entries))
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s is %v, want 0600", e.Name(), fi.Mode().Perm())
		}
	}
}

// Writers on one SQLite file (three Store values, as three processes would
// open it) appending at once keep one chain: no fork, no lost row.
func TestWritersOnOneFileAppendOneAuditChain(t *testing.T) {
	dir := t.TempDir()
	var stores []store.Store
	for range 3 {
		s, err := sqlite.Open(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		stores = append(stores, s)
	}
	storetest.ChainAcrossReplicas(t, stores, 50, 20)
}
