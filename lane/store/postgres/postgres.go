// Package postgres is the lane's scale-out registry on PostgreSQL, through
// pgx/v5. The schema is migrated on start; concurrent starts serialise on an
// advisory lock.
package postgres

import (
	"context"
	"embed"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sema-agent/sema/lane/store/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrationLockKey is the advisory lock taken while migrating ("sema").
const migrationLockKey = 0x73656d61

// Dialect is PostgreSQL's: $n placeholders, clock_timestamp() in Unix
// milliseconds, and SELECT … FOR UPDATE to lock a row until commit.
var Dialect = sqlstore.Dialect{
	Name:          "postgres",
	Now:           "(EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT",
	Placeholder:   func(n int) string { return "$" + strconv.Itoa(n) },
	ForUpdate:     " FOR UPDATE",
	MigrationLock: fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", migrationLockKey),
}

// The pool: at most MaxConns connections per replica, so N replicas need
// N × MaxConns of the server's max_connections (100 by default: six
// replicas). Every statement here is one short round trip or a short
// transaction, so 16 keep a replica's writers and readers moving; a caller
// that finds all 16 busy waits, bounded by its context. Connections idle
// for IdleTime are given back, and none lives longer than Lifetime, so a
// replica that went quiet or a server that failed over is not held on to.
const (
	MaxConns = 16
	IdleTime = 5 * time.Minute
	Lifetime = 30 * time.Minute
)

// Open connects to the database at url (a postgres:// URL or key=value DSN)
// and migrates it.
func Open(ctx context.Context, url string) (*sqlstore.Store, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(MaxConns)
	db.SetMaxIdleConns(MaxConns)
	db.SetConnMaxIdleTime(IdleTime)
	db.SetConnMaxLifetime(Lifetime)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("postgres: connect to %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	s, err := sqlstore.New(ctx, db, nil, Dialect, migrations)
	if err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}
