// Package sqlite is the lane's embedded registry: one SQLite file in a data
// directory (modernc.org/sqlite, pure Go), in WAL mode, created and migrated
// on first start.
//
// Its connections are two bounded pools, kept open for the life of the
// store, so the files it holds open are a small fixed number however many
// callers there are: one writer (WAL admits one writer at a time; every
// transaction begins IMMEDIATE on it, so writers queue in database/sql,
// bounded by each caller's context, instead of polling a busy lock) and
// Readers readers, which WAL lets read while the writer writes. A caller
// that finds its pool busy waits for a connection; it never opens another.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/sema-agent/sema/lane/store/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// FileName is the database file inside the data directory.
const FileName = "sema.db"

// Readers is the size of the read pool. Each connection holds two files
// open (the database and its WAL; the shared-memory index is one per
// process), so the store holds at most 2 × (1 + Readers) + 1.
const Readers = 4

// MaxOpenFiles is the most files the store holds open on FileName and its
// -wal and -shm companions.
const MaxOpenFiles = 2*(1+Readers) + 1

// Dialect is SQLite's: Unix milliseconds from julianday, and transactions
// that take the write lock at BEGIN (BEGIN IMMEDIATE), so no row lock clause.
var Dialect = sqlstore.Dialect{
	Name: "sqlite",
	Now:  "CAST(ROUND((julianday('now') - 2440587.5) * 86400000) AS INTEGER)",
}

// Open opens (creating when absent) the registry in dir.
func Open(ctx context.Context, dir string) (*sqlstore.Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: data dir: %w", err)
	}
	path := filepath.Join(dir, FileName)
	// The file exists, 0600, before SQLite opens it: SQLite gives the WAL
	// and shared-memory files it makes beside it the database file's mode,
	// so none of them is ever readable by others, whatever the dir's mode
	// or the umask.
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// The writer opens the file first: it creates it and turns WAL on,
	// which the readers then find (the journal mode is kept in the file).
	writer, err := openPool(ctx, path, 1, "journal_mode(WAL)", "synchronous(NORMAL)")
	if err != nil {
		return nil, err
	}
	readers, err := openPool(ctx, path, Readers, "query_only(1)")
	if err != nil {
		writer.Close()
		return nil, err
	}
	s, err := sqlstore.New(ctx, writer, readers, Dialect, migrations)
	if err != nil {
		readers.Close()
		writer.Close()
		return nil, err
	}
	// One process serves this file, and every revocation goes through it.
	s.ServedByOneProcess()
	// A WAL left by an older start, made before the file was private.
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(f, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.Close()
			return nil, fmt.Errorf("sqlite: %w", err)
		}
	}
	return s, nil
}

// createPrivate creates path 0600 if it does not exist, and makes it 0600
// if it does.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	f.Close()
	return os.Chmod(path, 0o600)
}

// openPool opens a pool of size connections that stay open: a connection
// closed and reopened under load is how open files piled up before (SQLite
// defers closing a file while another connection holds a lock on it).
func openPool(ctx context.Context, path string, size int, pragmas ...string) (*sql.DB, error) {
	q := url.Values{}
	// busy_timeout covers what the pools cannot: a checkpoint or WAL
	// recovery holding a lock for a moment.
	for _, p := range append([]string{"busy_timeout(10000)", "foreign_keys(1)"}, pragmas...) {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return db, nil
}
