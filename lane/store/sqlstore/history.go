package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
)

// historyColumns are the history table's columns, in the order rows are
// read.
const historyColumns = `seq, instruction_id, identity_id, api_key_id, device_id, root_session_id, replica, remote_addr,
	kind, summary, received_ms, dispatched_ms, settled_ms, outcome, exit_code,
	stdout_bytes, stderr_bytes, data_bytes, truncated_stdout, truncated_stderr, at_ms, prev_digest, digest`

// historyChain is the instruction history's hash chain
// (api.HistoryCanonical).
var historyChain = Chain[store.HistoryRow]{
	Name:  api.ChainHistory,
	Table: "history",
	Columns: []string{"instruction_id", "identity_id", "api_key_id", "device_id", "root_session_id", "replica", "remote_addr",
		"kind", "summary", "received_ms", "dispatched_ms", "settled_ms", "outcome", "exit_code",
		"stdout_bytes", "stderr_bytes", "data_bytes", "truncated_stdout", "truncated_stderr"},
	Values: func(r store.HistoryRow) []any {
		return []any{r.InstructionID, nullString(r.IdentityID), nullString(r.APIKeyID), r.DeviceID,
			nullString(r.RootSessionID), nullString(r.Replica), nullString(r.RemoteAddr), r.Kind, r.Summary,
			r.ReceivedAt.UnixMilli(), nullMs(r.DispatchedAt), r.SettledAt.UnixMilli(), r.Outcome, nullInt(r.ExitCode),
			r.StdoutBytes, r.StderrBytes, r.DataBytes, r.TruncatedStdout, r.TruncatedStderr}
	},
	Scan: func(rows *sql.Rows, head []any) (store.HistoryRow, error) {
		var (
			r                                       store.HistoryRow
			identity, key, session, replica, remote sql.NullString
			received, settled                       int64
			dispatched, exit                        sql.NullInt64
		)
		err := rows.Scan(append(head, &r.InstructionID, &identity, &key, &r.DeviceID, &session, &replica, &remote,
			&r.Kind, &r.Summary, &received, &dispatched, &settled, &r.Outcome, &exit,
			&r.StdoutBytes, &r.StderrBytes, &r.DataBytes, &r.TruncatedStdout, &r.TruncatedStderr)...)
		r.IdentityID, r.APIKeyID, r.RootSessionID, r.Replica, r.RemoteAddr = identity.String, key.String, session.String, replica.String, remote.String
		r.ReceivedAt, r.DispatchedAt, r.SettledAt = msTime(received), nullMsTime(dispatched), msTime(settled)
		if exit.Valid {
			code := int(exit.Int64)
			r.ExitCode = &code
		}
		return r, err
	},
	Canonical: func(seq, atMs int64, r store.HistoryRow) []byte {
		return api.HistoryCanonical(seq, atMs, historyFields(r))
	},
}

// historyFields are the fields of r its digest covers, at the precision
// the table keeps (milliseconds).
func historyFields(r store.HistoryRow) api.InstructionRecordFields {
	f := api.InstructionRecordFields{
		InstructionID: r.InstructionID, IdentityID: r.IdentityID, APIKeyID: r.APIKeyID, DeviceID: r.DeviceID,
		RootSessionID: r.RootSessionID, Replica: r.Replica, RemoteAddr: r.RemoteAddr, Kind: r.Kind, Summary: r.Summary,
		Outcome: r.Outcome, ReceivedMs: r.ReceivedAt.UnixMilli(), SettledMs: r.SettledAt.UnixMilli(),
		StdoutBytes: r.StdoutBytes, StderrBytes: r.StderrBytes, DataBytes: r.DataBytes,
		TruncatedStdout: r.TruncatedStdout, TruncatedStderr: r.TruncatedStderr,
	}
	if r.DispatchedAt != nil {
		ms := r.DispatchedAt.UnixMilli()
		f.DispatchedMs = &ms
	}
	if r.ExitCode != nil {
		code := int64(*r.ExitCode)
		f.ExitCode = &code
	}
	return f
}

// RecordHistory appends history rows to the history chain in one
// transaction: under the chain's lock each gets the next seq, so seq order
// is commit order, on every backend and with any number of replicas
// writing. A row whose instruction has one already (a batch written again
// after a failure that had committed) is left out: a chain's rows are all
// new.
func (s *Store) RecordHistory(ctx context.Context, rows ...store.HistoryRow) error {
	if len(rows) == 0 {
		return nil
	}
	return s.inTx(ctx, func(tx *sql.Tx) error {
		fresh, err := s.newHistoryRows(ctx, tx, rows)
		if err != nil || len(fresh) == 0 {
			return err
		}
		_, err = appendChain(ctx, s, tx, historyChain, fresh)
		return err
	})
}

// newHistoryRows are the rows whose instruction has no row yet, each once.
func (s *Store) newHistoryRows(ctx context.Context, tx *sql.Tx, rows []store.HistoryRow) ([]store.HistoryRow, error) {
	seen := make(map[string]bool, len(rows))
	for chunk := range slices.Chunk(rows, 500) {
		ids := make([]any, len(chunk))
		for i, r := range chunk {
			ids[i] = r.InstructionID
		}
		query := `SELECT instruction_id FROM history WHERE instruction_id IN (?` + strings.Repeat(", ?", len(ids)-1) + `)`
		found, err := tx.QueryContext(ctx, s.q(query), ids...)
		if err != nil {
			return nil, s.wrap("record history", err)
		}
		for found.Next() {
			var id string
			if err := found.Scan(&id); err != nil {
				found.Close()
				return nil, s.wrap("record history", err)
			}
			seen[id] = true
		}
		found.Close()
		if err := found.Err(); err != nil {
			return nil, s.wrap("record history", err)
		}
	}
	fresh := rows[:0:0]
	for _, r := range rows {
		if !seen[r.InstructionID] {
			seen[r.InstructionID] = true
			fresh = append(fresh, r)
		}
	}
	return fresh, nil
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
		received, settled, at                                 int64
		dispatched, exit                                      sql.NullInt64
	)
	err := scan(&r.Seq, &r.InstructionID, &identity, &key, &r.DeviceID, &session, &replica, &remote,
		&r.Kind, &r.Summary, &received, &dispatched, &settled, &r.Outcome, &exit,
		&r.StdoutBytes, &r.StderrBytes, &r.DataBytes, &r.TruncatedStdout, &r.TruncatedStderr, &at, &prev, &digest)
	if err != nil {
		return r, err
	}
	r.IdentityID, r.APIKeyID, r.RootSessionID, r.Replica, r.RemoteAddr = identity.String, key.String, session.String, replica.String, remote.String
	r.At, r.PrevDigest, r.Digest = msTime(at), prev.String, digest.String
	r.ReceivedAt, r.DispatchedAt, r.SettledAt = msTime(received), nullMsTime(dispatched), msTime(settled)
	if exit.Valid {
		code := int(exit.Int64)
		r.ExitCode = &code
	}
	return r, nil
}

// PruneHistory deletes the rows older than retention by the database
// clock, as a prefix of the chain: the last one pruned becomes the chain's
// anchor, so it stays verifiable from the oldest row kept.
func (s *Store) PruneHistory(ctx context.Context, retention time.Duration) (int64, error) {
	if retention <= 0 {
		return 0, fmt.Errorf("%s: prune history: the retention %v is not positive", s.d.Name, retention)
	}
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		n, err = pruneChain(ctx, s, tx, historyChain, retention, "")
		return err
	})
	return n, err
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
