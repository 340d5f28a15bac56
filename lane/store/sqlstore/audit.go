package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// auditRowsPerStatement bounds one multi-row INSERT: 6 parameters a row
// stays far below both backends' parameter limits.
const auditRowsPerStatement = 256

// Audit appends audit rows, stamped by the database clock, in one
// transaction of multi-row INSERTs.
func (s *Store) Audit(ctx context.Context, events ...store.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		for len(events) > 0 {
			chunk := events[:min(len(events), auditRowsPerStatement)]
			events = events[len(chunk):]
			values := strings.TrimSuffix(strings.Repeat("(NOW, ?, ?, ?, ?, ?, ?), ", len(chunk)), ", ")
			args := make([]any, 0, 6*len(chunk))
			for _, e := range chunk {
				args = append(args, nullString(e.IdentityID), nullString(e.DeviceID), e.Event, nullString(e.Reason), nullString(e.RemoteAddr), max(e.Count, 1))
			}
			if _, err := tx.ExecContext(ctx, s.sql(`INSERT INTO audit (at_ms, identity_id, device_id, event, reason, remote_addr, count) VALUES `+values), args...); err != nil {
				return s.wrap("audit", err)
			}
		}
		return nil
	})
}

// AuditEvents returns audit rows, oldest first.
func (s *Store) AuditEvents(ctx context.Context, f store.AuditFilter) ([]store.AuditEvent, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, val string }{{"identity_id", f.IdentityID}, {"device_id", f.DeviceID}, {"event", f.Event}, {"remote_addr", f.RemoteAddr}} {
		if c.val != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	query := `SELECT id, at_ms, identity_id, device_id, event, reason, remote_addr, count FROM audit`
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
			e                                store.AuditEvent
			at                               int64
			identity, device, reason, remote sql.NullString
		)
		if err := rows.Scan(&e.ID, &at, &identity, &device, &e.Event, &reason, &remote, &e.Count); err != nil {
			return nil, s.wrap("read audit", err)
		}
		e.At, e.IdentityID, e.DeviceID, e.Reason, e.RemoteAddr = msTime(at), identity.String, device.String, reason.String, remote.String
		out = append(out, e)
	}
	return out, s.wrap("read audit", rows.Err())
}

// PruneAudit deletes rows older than retention by the database clock,
// except the events in keep.
func (s *Store) PruneAudit(ctx context.Context, retention time.Duration, keep []string) (int64, error) {
	if retention <= 0 {
		return 0, fmt.Errorf("%s: prune audit: the retention %v is not positive", s.d.Name, retention)
	}
	query := `DELETE FROM audit WHERE at_ms < NOW - ?`
	args := []any{retention.Milliseconds()}
	if len(keep) > 0 {
		query += ` AND event NOT IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(keep)), ", ") + `)`
		for _, k := range keep {
			args = append(args, k)
		}
	}
	res, err := s.db.ExecContext(ctx, s.sql(query), args...)
	if err != nil {
		return 0, s.wrap("prune audit", err)
	}
	n, err := res.RowsAffected()
	return n, s.wrap("prune audit", err)
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

var _ store.Store = (*Store)(nil)
