package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
)

// auditChain is the audit trail's hash chain (api.AuditCanonical).
var auditChain = Chain[store.AuditEvent]{
	Name:    api.ChainAudit,
	Table:   "audit",
	Columns: []string{"identity_id", "device_id", "event", "reason", "remote_addr", "count"},
	Values: func(e store.AuditEvent) []any {
		return []any{nullString(e.IdentityID), nullString(e.DeviceID), e.Event, nullString(e.Reason), nullString(e.RemoteAddr), max(e.Count, 1)}
	},
	Scan: func(rows *sql.Rows, head []any) (store.AuditEvent, error) {
		var e store.AuditEvent
		var identity, device, reason, remote sql.NullString
		err := rows.Scan(append(head, &identity, &device, &e.Event, &reason, &remote, &e.Count)...)
		e.IdentityID, e.DeviceID, e.Reason, e.RemoteAddr = identity.String, device.String, reason.String, remote.String
		return e, err
	},
	Canonical: func(seq, atMs int64, e store.AuditEvent) []byte {
		return api.AuditCanonical(seq, atMs, e.IdentityID, e.DeviceID, e.Event, e.Reason, e.RemoteAddr, max(e.Count, 1))
	},
}

// Audit appends audit rows to the audit chain, stamped by the database
// clock, in one transaction.
func (s *Store) Audit(ctx context.Context, events ...store.AuditEvent) error {
	if len(events) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		_, err := appendChain(ctx, s, tx, auditChain, events)
		return err
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
	if !f.Since.IsZero() {
		where, args = append(where, "at_ms >= ?"), append(args, f.Since.UnixMilli())
	}
	if f.AfterID != 0 {
		where, args = append(where, "id > ?"), append(args, f.AfterID)
	}
	query := `SELECT id, at_ms, identity_id, device_id, event, reason, remote_addr, count, seq, prev_digest, digest FROM audit`
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
			seq                              sql.NullInt64
			prev, digest                     sql.NullString
		)
		if err := rows.Scan(&e.ID, &at, &identity, &device, &e.Event, &reason, &remote, &e.Count, &seq, &prev, &digest); err != nil {
			return nil, s.wrap("read audit", err)
		}
		e.At, e.IdentityID, e.DeviceID, e.Reason, e.RemoteAddr = msTime(at), identity.String, device.String, reason.String, remote.String
		e.Seq, e.Prev, e.Digest = seq.Int64, prev.String, digest.String
		out = append(out, e)
	}
	return out, s.wrap("read audit", rows.Err())
}

// PruneAudit deletes rows older than retention by the database clock,
// except the events in keep: on the chain, a prefix, whose last row
// becomes the chain's anchor (pruneChain); rows written before the chain,
// by age alone.
func (s *Store) PruneAudit(ctx context.Context, retention time.Duration, keep []string) (int64, error) {
	if retention <= 0 {
		return 0, fmt.Errorf("%s: prune audit: the retention %v is not positive", s.d.Name, retention)
	}
	var pruned int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var keepWhere string
		var keepArgs []any
		if len(keep) > 0 {
			keepWhere = `event NOT IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(keep)), ", ") + `)`
			for _, k := range keep {
				keepArgs = append(keepArgs, k)
			}
		}
		var err error
		pruned, err = pruneChain(ctx, s, tx, auditChain, retention, keepWhere, keepArgs...)
		return err
	})
	return pruned, err
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }

var _ store.Store = (*Store)(nil)
