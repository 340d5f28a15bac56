package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// historyColumns are the history table's columns, in the order rows are
// written and read.
const historyColumns = `seq, instruction_id, identity_id, api_key_id, device_id, root_session_id, replica, remote_addr,
	kind, summary, received_ms, dispatched_ms, settled_ms, outcome, exit_code,
	stdout_bytes, stderr_bytes, data_bytes, truncated_stdout, truncated_stderr, prev_digest, digest`

// historyRowsPerStatement bounds one multi-row INSERT: 22 parameters a row
// stays far below both backends' parameter limits.
const historyRowsPerStatement = 128

// RecordHistory appends history rows in one transaction. The table's write
// lock is taken first, and each row gets the next seq after the highest
// committed: so seq order is commit order, on every backend and with any
// number of replicas writing.
func (s *Store) RecordHistory(ctx context.Context, rows ...store.HistoryRow) error {
	if len(rows) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if s.d.LockTable != "" {
			if _, err := tx.ExecContext(ctx, fmt.Sprintf(s.d.LockTable, "history")); err != nil {
				return s.wrap("lock history", err)
			}
		}
		var seq int64
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM history`).Scan(&seq); err != nil {
			return s.wrap("read history seq", err)
		}
		for len(rows) > 0 {
			chunk := rows[:min(len(rows), historyRowsPerStatement)]
			rows = rows[len(chunk):]
			values := strings.TrimSuffix(strings.Repeat("(?"+strings.Repeat(", ?", 21)+"), ", len(chunk)), ", ")
			args := make([]any, 0, 22*len(chunk))
			for _, r := range chunk {
				seq++
				args = append(args, seq, r.InstructionID, nullString(r.IdentityID), nullString(r.APIKeyID), r.DeviceID,
					nullString(r.RootSessionID), nullString(r.Replica), nullString(r.RemoteAddr), r.Kind, r.Summary,
					r.ReceivedAt.UnixMilli(), nullMs(r.DispatchedAt), r.SettledAt.UnixMilli(), r.Outcome, nullInt(r.ExitCode),
					r.StdoutBytes, r.StderrBytes, r.DataBytes, r.TruncatedStdout, r.TruncatedStderr,
					nullString(r.PrevDigest), nullString(r.Digest))
			}
			query := `INSERT INTO history (` + historyColumns + `) VALUES ` + values + ` ON CONFLICT (instruction_id) DO NOTHING`
			if _, err := tx.ExecContext(ctx, s.sql(query), args...); err != nil {
				return s.wrap("record history", err)
			}
		}
		return nil
	})
}

// History returns history rows in seq order.
func (s *Store) History(ctx context.Context, f store.HistoryFilter) ([]store.HistoryRow, error) {
	var where []string
	var args []any
	for _, c := range []struct{ col, val string }{
		{"identity_id", f.IdentityID}, {"device_id", f.DeviceID}, {"root_session_id", f.RootSessionID}, {"outcome", f.Outcome},
	} {
		if c.val != "" {
			where = append(where, c.col+" = ?")
			args = append(args, c.val)
		}
	}
	if f.After > 0 {
		where, args = append(where, "seq > ?"), append(args, f.After)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "received_ms >= ?"), append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		where, args = append(where, "received_ms < ?"), append(args, f.Until.UnixMilli())
	}
	query := `SELECT ` + historyColumns + ` FROM history`
	if len(where) > 0 {
		query += ` WHERE ` + strings.Join(where, " AND ")
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	query += ` ORDER BY seq LIMIT ?`
	args = append(args, limit)
	rows, err := s.reads.QueryContext(ctx, s.sql(query), args...)
	if err != nil {
		return nil, s.wrap("read history", err)
	}
	defer rows.Close()
	var out []store.HistoryRow
	for rows.Next() {
		r, err := scanHistory(rows.Scan)
		if err != nil {
			return nil, s.wrap("read history", err)
		}
		out = append(out, r)
	}
	return out, s.wrap("read history", rows.Err())
}

// HistoryRow returns one instruction's row.
func (s *Store) HistoryRow(ctx context.Context, instructionID string) (store.HistoryRow, error) {
	row := s.reads.QueryRowContext(ctx, s.sql(`SELECT `+historyColumns+` FROM history WHERE instruction_id = ?`), instructionID)
	r, err := scanHistory(row.Scan)
	if errors.Is(err, sql.ErrNoRows) {
		return r, store.ErrNotFound
	}
	return r, s.wrap("read history row", err)
}

// scanHistory reads one row of historyColumns.
func scanHistory(scan func(...any) error) (store.HistoryRow, error) {
	var (
		r                                                     store.HistoryRow
		identity, key, session, replica, remote, prev, digest sql.NullString
		received, settled                                     int64
		dispatched, exit                                      sql.NullInt64
	)
	err := scan(&r.Seq, &r.InstructionID, &identity, &key, &r.DeviceID, &session, &replica, &remote,
		&r.Kind, &r.Summary, &received, &dispatched, &settled, &r.Outcome, &exit,
		&r.StdoutBytes, &r.StderrBytes, &r.DataBytes, &r.TruncatedStdout, &r.TruncatedStderr, &prev, &digest)
	if err != nil {
		return r, err
	}
	r.IdentityID, r.APIKeyID, r.RootSessionID, r.Replica, r.RemoteAddr = identity.String, key.String, session.String, replica.String, remote.String
	r.PrevDigest, r.Digest = prev.String, digest.String
	r.ReceivedAt, r.DispatchedAt, r.SettledAt = msTime(received), nullMsTime(dispatched), msTime(settled)
	if exit.Valid {
		code := int(exit.Int64)
		r.ExitCode = &code
	}
	return r, nil
}

// PruneHistory deletes the rows settled longer than retention ago, by the
// database clock.
func (s *Store) PruneHistory(ctx context.Context, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, fmt.Errorf("%s: prune history: the retention %v is not positive", s.d.Name, retention)
	}
	res, err := s.db.ExecContext(ctx, s.sql(`DELETE FROM history WHERE settled_ms < NOW - ?`), retention.Milliseconds())
	if err != nil {
		return 0, s.wrap("prune history", err)
	}
	n, err := res.RowsAffected()
	return n, s.wrap("prune history", err)
}

func nullMs(t *time.Time) sql.NullInt64 {
	if t == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: true}
}

func nullInt(n *int) sql.NullInt64 {
	if n == nil {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: int64(*n), Valid: true}
}
