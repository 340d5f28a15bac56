// Package sqlite is the lane's embedded registry: one SQLite file in a data
// directory (modernc.org/sqlite, pure Go), in WAL mode, created and migrated
// on first start.
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
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
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	s, err := sqlstore.New(ctx, db, Dialect, migrations)
	if err != nil {
		db.Close()
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		s.Close()
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return s, nil
}
