package sqlstore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/sema-agent/sema/lane/store"
)

// Audit appends an audit row stamped by the database clock.
func (s *Store) Audit(ctx context.Context, e store.AuditEvent) error {
	_, err := s.db.ExecContext(ctx, s.sql(`INSERT INTO audit (at_ms, identity_id, device_id, event, reason) VALUES (NOW, ?, ?, ?, ?)`),
		nullString(e.IdentityID), nullString(e.DeviceID), e.Event, nullString(e.Reason))
	return s.wrap("audit", err)
}

// AuditEvents returns audit rows, oldest first.
func (s *Store) AuditEvents(ctx context.Context, f store.AuditFilter) ([]store.AuditEvent, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, val string }{{"identity_id", f.IdentityID}, {"device_id", f.DeviceID}, {"event", f.Event}} {
		if c.val != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	query := `SELECT id, at_ms, identity_id, device_id, event, reason FROM audit`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	query += ` ORDER BY id LIMIT ?`
	args = append(args, limit)
	rows, err := s.reads.QueryContext(ctx, s.sql(query), args...)
	if err != nil {
		return nil, s.wrap("read audit", err)
	}
	defer rows.Close()
	var out []store.AuditEvent
	for rows.Next() {
		var (
			e                        store.AuditEvent
			at                       int64
			identity, device, reason sql.NullString
		)
		if err := rows.Scan(&e.ID, &at, &identity, &device, &e.Event, &reason); err != nil {
			return nil, s.wrap("read audit", err)
		}
		e.At, e.IdentityID, e.DeviceID, e.Reason = msTime(at), identity.String, device.String, reason.String
		out = append(out, e)
	}
	return out, s.wrap("read audit", rows.Err())
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

var _ store.Store = (*Store)(nil)
