package sqlstore

import (
	"context"
	"database/sql"
	"errors"

	"github.com/sema-agent/sema/lane/store"
)

const sessionColumns = `owner_id, root_session_id, device_id, bound_ms`

func scanSession(row scanner) (store.Session, error) {
	var (
		b     store.Session
		bound int64
	)
	err := row.Scan(&b.OwnerID, &b.RootSessionID, &b.DeviceID, &bound)
	if errors.Is(err, sql.ErrNoRows) {
		return b, store.ErrNotFound
	}
	b.BoundAt = msTime(bound)
	return b, err
}

// BindSession binds a root session unless it is bound, and returns the
// binding that holds (§9). The winner of concurrent first binds is decided
// by the primary key: INSERT … ON CONFLICT DO NOTHING, then the row is read
// back (a conflicting insert waits for the other's commit, so the read
// sees it). A session bound already costs one read and no write.
func (s *Store) BindSession(ctx context.Context, ownerID, rootSessionID, deviceID string) (store.Session, error) {
	b, err := s.Session(ctx, ownerID, rootSessionID)
	if !errors.Is(err, store.ErrNotFound) {
		return b, err
	}
	if _, err := s.db.ExecContext(ctx, s.sql(`INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, NOW)
		ON CONFLICT (owner_id, root_session_id) DO NOTHING`), ownerID, rootSessionID, deviceID); err != nil {
		return b, s.wrap("bind session", err)
	}
	return s.readSession(s.db.QueryRowContext(ctx, s.sql(sessionRead), ownerID, rootSessionID))
}

// RebindSession binds a root session to a device, replacing any binding;
// the same device keeps its boundAt.
func (s *Store) RebindSession(ctx context.Context, ownerID, rootSessionID, deviceID string) (store.Session, error) {
	b, err := scanSession(s.db.QueryRowContext(ctx, s.sql(`INSERT INTO sessions (`+sessionColumns+`) VALUES (?, ?, ?, NOW)
		ON CONFLICT (owner_id, root_session_id) DO UPDATE SET device_id = excluded.device_id,
			bound_ms = CASE WHEN sessions.device_id = excluded.device_id THEN sessions.bound_ms ELSE excluded.bound_ms END
		RETURNING `+sessionColumns), ownerID, rootSessionID, deviceID))
	return b, s.wrap("rebind session", err)
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
