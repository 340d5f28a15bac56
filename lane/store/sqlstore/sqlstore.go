// Package sqlstore implements store.Store once, over database/sql, for every
// SQL backend. A Dialect carries what differs: placeholders, the database
// clock, row locking, and how to recognise a unique violation. Times are
// stored as Unix milliseconds read from the database clock, never the Go
// process's.
package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Dialect is what one SQL backend does differently. Queries are written with
// ? placeholders and the word NOW for the database clock.
type Dialect struct {
	// Name names the backend in errors.
	Name string
	// Now is an SQL expression for the database clock in Unix milliseconds.
	Now string
	// Placeholder returns the n-th (1-based) bind placeholder.
	Placeholder func(n int) string
	// ForUpdate is appended to a SELECT that must lock its row until commit
	// ("" where transactions already take the write lock, as SQLite's
	// BEGIN IMMEDIATE does).
	ForUpdate string
	// MigrationLock, when not "", is run first in the migration transaction
	// so that two processes never migrate at once.
	MigrationLock string
}

// Store is the shared SQL implementation of store.Store.
type Store struct {
	db    *sql.DB // writes, and every transaction
	reads *sql.DB // statements that only read; db itself when the backend has one pool
	d     Dialect
	// deviceByID is prepared once: the lane reads a device on every
	// dispatch, and parsing the statement was most of that read's cost
	// (SQLite: ~90 of ~150 µs).
	deviceByID *sql.Stmt
	// sessionByID is prepared for the same reason: every dispatch that
	// carries a rootSessionId reads its binding (§9).
	sessionByID *sql.Stmt
	// identityByKey is prepared because every request of the HTTP API
	// authenticates with it (SQLite: parsing was ~70 of ~150 µs).
	identityByKey *sql.Stmt
	// oneProcess: every write to the database passes through this Store
	// (ServedByOneProcess).
	oneProcess bool
	// keys, when not nil, remembers authenticated API keys (keycache.go).
	keys *keyCache
	// revocations counts RevokeDevice calls (DeviceRevocations).
	revocations atomic.Uint64
}

// New wraps an open database after applying the migrations in fsys (files
// named NNNN_description.sql, applied in order, each once). reads, when not
// nil, is a second handle on the same database for the statements that
// only read (SQLite: a pool of readers beside its one writer); Close closes
// it too.
func New(ctx context.Context, db, reads *sql.DB, d Dialect, fsys embed.FS) (*Store, error) {
	if reads == nil {
		reads = db
	}
	s := &Store{db: db, reads: reads, d: d}
	if err := s.migrate(ctx, fsys); err != nil {
		return nil, err
	}
	for _, st := range []struct {
		dst         **sql.Stmt
		what, query string
	}{
		{&s.deviceByID, "the device read", `SELECT ` + deviceColumns + ` FROM devices WHERE id = ?`},
		{&s.sessionByID, "the session read", sessionRead},
		{&s.identityByKey, "the api key read", identityByKeyRead},
	} {
		var err error
		if *st.dst, err = reads.PrepareContext(ctx, s.sql(st.query)); err != nil {
			s.closeStatements()
			return nil, s.wrap("prepare "+st.what, err)
		}
	}
	return s, nil
}

// ServedByOneProcess declares that this Store is the only way to its
// database: one process serves it and every write passes here (SQLite).
// IdentityByAPIKey then remembers the keys it authenticated (keycache.go),
// and DeviceRevocations counts revocations for the lane. A write made
// elsewhere (another process on the same file) would not be seen: a
// revoked key would work until its next recorded use, up to
// store.LastUsedAtGranularity later.
func (s *Store) ServedByOneProcess() {
	s.oneProcess = true
	s.keys = newKeyCache()
}

// DeviceRevocations counts the RevokeDevice calls of a store served by one
// process (ok false for any other): while the count has not moved, no
// device row has been revoked, so a row read earlier still says who owns
// the device and that it is not revoked.
func (s *Store) DeviceRevocations() (n uint64, ok bool) {
	return s.revocations.Load(), s.oneProcess
}

// ForgetAPIKeys drops the API keys a store served by one process remembers,
// for a tool (or a test) that has written the registry's keys directly.
func (s *Store) ForgetAPIKeys() {
	if s.keys != nil {
		s.keys.forget()
	}
}

// DB exposes the database handle that writes, for tests and operators'
// tooling.
func (s *Store) DB() *sql.DB { return s.db }

// q rewrites ? placeholders into the dialect's form.
func (s *Store) q(query string) string {
	if s.d.Placeholder == nil {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString(s.d.Placeholder(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// now substitutes the database clock for the upper-case word NOW in a query
// (column names here are lower case, so nothing else is matched).
func (s *Store) now(query string) string { return strings.ReplaceAll(query, "NOW", "("+s.d.Now+")") }

func (s *Store) sql(query string) string { return s.q(s.now(query)) }

// Ping checks that the database answers, to writes and to reads.
func (s *Store) Ping(ctx context.Context) error {
	return errors.Join(s.db.PingContext(ctx), s.reads.PingContext(ctx))
}

// Close releases the database.
func (s *Store) Close() error {
	s.closeStatements()
	if s.reads != s.db {
		s.reads.Close()
	}
	return s.db.Close()
}

// closeStatements closes the prepared statements New made.
func (s *Store) closeStatements() {
	for _, st := range []*sql.Stmt{s.deviceByID, s.sessionByID, s.identityByKey} {
		if st != nil {
			st.Close()
		}
	}
}

func (s *Store) migrate(ctx context.Context, fsys embed.FS) error {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin migrations: %w", s.d.Name, err)
	}
	defer tx.Rollback()
	if s.d.MigrationLock != "" {
		if _, err := tx.ExecContext(ctx, s.d.MigrationLock); err != nil {
			return fmt.Errorf("%s: lock migrations: %w", s.d.Name, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_ms BIGINT NOT NULL)`); err != nil {
		return fmt.Errorf("%s: create schema_migrations: %w", s.d.Name, err)
	}
	var current int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("%s: read schema version: %w", s.d.Name, err)
	}
	for _, name := range names {
		base := strings.TrimPrefix(name, "migrations/")
		version, err := strconv.ParseInt(strings.SplitN(base, "_", 2)[0], 10, 64)
		if err != nil {
			return fmt.Errorf("%s: migration %s: the name must start with a version number", s.d.Name, base)
		}
		if version <= current {
			continue
		}
		body, err := fsys.ReadFile(name)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			return fmt.Errorf("%s: migration %s: %w", s.d.Name, base, err)
		}
		if _, err := tx.ExecContext(ctx, s.sql(`INSERT INTO schema_migrations (version, name, applied_ms) VALUES (?, ?, NOW)`), version, base); err != nil {
			return fmt.Errorf("%s: record migration %s: %w", s.d.Name, base, err)
		}
	}
	return tx.Commit()
}

// SchemaVersion returns the highest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	var v int64
	err := s.reads.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", s.d.Name, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", s.d.Name, err)
	}
	return nil
}

func msTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

func nullMsTime(ms sql.NullInt64) *time.Time {
	if !ms.Valid {
		return nil
	}
	t := msTime(ms.Int64)
	return &t
}

func (s *Store) wrap(op string, err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("%s: %s: %w", s.d.Name, op, err)
}
