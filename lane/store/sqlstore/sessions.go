package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"math"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

const sessionColumns = `owner_id, root_session_id, device_id, bound_ms, used_ms`

func scanSession(row scanner) (store.Session, error) {
	var (
		b           store.Session
		bound, used int64
	)
	err := row.Scan(&b.OwnerID, &b.RootSessionID, &b.DeviceID, &bound, &used)
	if errors.Is(err, sql.ErrNoRows) {
		return b, store.ErrNotFound
	}
	b.BoundAt, b.UsedAt = msTime(bound), msTime(used)
	return b, err
}

// BindSession binds a root session unless it is bound, and returns the
// binding that holds (§9). The winner of concurrent first binds is decided
// by the primary key: INSERT … ON CONFLICT DO NOTHING, then the row is read
// back (a conflicting insert waits for the other's commit, so the read
// sees it). A session bound already costs one read, and a write at most
// once per SessionUseGranularity to record its use. A new binding is
// refused with ErrSessionLimit when the owner holds max (0: no limit).
func (s *Store) BindSession(ctx context.Context, ownerID, rootSessionID, deviceID string, max int) (store.Session, error) {
	b, err := s.Session(ctx, ownerID, rootSessionID)
	switch {
	case err == nil:
		return b, s.touchSession(ctx, b)
	case !errors.Is(err, store.ErrNotFound):
		return b, err
	}
	if err := s.insertSession(ctx, ownerID, rootSessionID, deviceID, max); err != nil {
		return b, err
	}
	b, err = s.readSession(s.db.QueryRowContext(ctx, s.sql(sessionRead), ownerID, rootSessionID))
	if errors.Is(err, store.ErrNotFound) {
		return b, store.ErrSessionLimit // neither inserted nor there: the limit refused it
	}
	return b, err
}

// insertSession inserts a binding unless one exists or the owner holds max
// bindings already (a count in the same statement: two racing inserts may
// both pass at max-1, so the limit holds within the concurrent binds).
func (s *Store) insertSession(ctx context.Context, ownerID, rootSessionID, deviceID string, max int) error {
	if max <= 0 {
		max = math.MaxInt32
	}
	_, err := s.db.ExecContext(ctx, s.sql(`INSERT INTO sessions (`+sessionColumns+`)
		SELECT ?, ?, ?, NOW, NOW WHERE (SELECT count(*) FROM sessions WHERE owner_id = ?) < ?
		ON CONFLICT (owner_id, root_session_id) DO NOTHING`), ownerID, rootSessionID, deviceID, ownerID, max)
	return s.wrap("bind session", err)
}

// touchSession records a binding's use when the last one recorded is
// SessionUseGranularity old.
func (s *Store) touchSession(ctx context.Context, b store.Session) error {
	granularity := store.SessionUseGranularity
	if time.Since(b.UsedAt) < granularity {
		return nil
	}
	_, err := s.db.ExecContext(ctx, s.sql(`UPDATE sessions SET used_ms = NOW
		WHERE owner_id = ? AND root_session_id = ? AND used_ms <= NOW - ?`), b.OwnerID, b.RootSessionID, granularity.Milliseconds())
	return s.wrap("record session use", err)
}

// RebindSession binds a root session to a device, replacing any binding;
// the same device keeps its boundAt. An unbound session is a new binding,
// refused with ErrSessionLimit when the owner holds max (0: no limit).
func (s *Store) RebindSession(ctx context.Context, ownerID, rootSessionID, deviceID string, max int) (store.Session, error) {
	if _, err := s.Session(ctx, ownerID, rootSessionID); errors.Is(err, store.ErrNotFound) {
		if err := s.insertSession(ctx, ownerID, rootSessionID, deviceID, max); err != nil {
			return store.Session{}, err
		}
		if _, err := s.readSession(s.db.QueryRowContext(ctx, s.sql(sessionRead), ownerID, rootSessionID)); errors.Is(err, store.ErrNotFound) {
			return store.Session{}, store.ErrSessionLimit
		}
	}
	b, err := scanSession(s.db.QueryRowContext(ctx, s.sql(`INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, NOW, NOW)
		ON CONFLICT (owner_id, root_session_id) DO UPDATE SET device_id = excluded.device_id, used_ms = excluded.used_ms,
			bound_ms = CASE WHEN sessions.device_id = excluded.device_id THEN sessions.bound_ms ELSE excluded.bound_ms END
		RETURNING `+sessionColumns), ownerID, rootSessionID, deviceID))
	return b, s.wrap("rebind session", err)
}

// DeleteSession removes an owner's binding of a root session; ErrNotFound
// when there is none.
func (s *Store) DeleteSession(ctx context.Context, ownerID, rootSessionID string) error {
	res, err := s.db.ExecContext(ctx, s.sql(`DELETE FROM sessions WHERE owner_id = ? AND root_session_id = ?`), ownerID, rootSessionID)
	if err != nil {
		return s.wrap("delete session", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return store.ErrNotFound
	}
	return nil
}

// PruneSessions deletes the bindings not used for idle, by the database
// clock.
func (s *Store) PruneSessions(ctx context.Context, idle time.Duration) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.sql(`DELETE FROM sessions WHERE used_ms < NOW - ?`), idle.Milliseconds())
	if err != nil {
		return 0, s.wrap("prune sessions", err)
	}
	n, err := res.RowsAffected()
	return n, s.wrap("prune sessions", err)
}

// sessionRead reads one binding.
const sessionRead = `SELECT ` + sessionColumns + ` FROM sessions WHERE owner_id = ? AND root_session_id = ?`

// Session returns an owner's binding of a root session.
func (s *Store) Session(ctx context.Context, ownerID, rootSessionID string) (store.Session, error) {
	return s.readSession(s.sessionByID.QueryRowContext(ctx, ownerID, rootSessionID))
}

func (s *Store) readSession(row *sql.Row) (store.Session, error) {
	b, err := scanSession(row)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return b, s.wrap("read session", err)
	}
	return b, err
}
