package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sema-agent/sema/api"
	"github.com/sema-agent/sema/lane/store"
)

// A hash chain over one table (docs/audit.md, "The chain"; the canonical
// form and the digest are api's). A chained table has, beside its own
// columns, at_ms, seq, prev_digest and digest, and a unique index on seq;
// the chain's head and anchor are its row of chain_heads.
//
// Appending takes the chain's lock first, in the write transaction: the
// head row, locked FOR UPDATE on PostgreSQL (SQLite's BEGIN IMMEDIATE has
// taken the database's write lock already), so that writers on any number
// of processes append one after another and never fork the chain. The time
// is read once, by the database clock, with the head; the digests are
// computed here, in Go.

// Chain is one chained table, T its row. Another table joins a chain of
// its own in four steps:
//
//  1. its migration gives it, beside its own columns, at_ms BIGINT NOT
//     NULL, seq BIGINT, prev_digest TEXT, digest TEXT and a UNIQUE index
//     on seq (chain_heads exists; a chain's row there is made by its first
//     append);
//  2. api gets its canonical bytes: a function calling api.ChainCanonical
//     with the chain's name, seq, at_ms and its fields in a fixed,
//     documented order;
//  3. here, a Chain[T] value naming them, added to chains below, which
//     makes ChainHead and VerifyChain answer for it;
//  4. its write calls appendChain(ctx, s, tx, itsChain, rows) inside its
//     write transaction (appendChain stamps at_ms, seq and the digests;
//     every row given is inserted, so the rows must be new: an INSERT
//     that skipped one would leave a gap in the chain), and its pruning
//     calls pruneChain in a transaction of its own.
type Chain[T any] struct {
	// Name is the chain's: its row of chain_heads, and the first field of
	// every row's canonical bytes.
	Name string
	// Table holds the rows.
	Table string
	// Columns are the row's own columns (not at_ms, seq, prev_digest,
	// digest), in the order of Values and of Scan.
	Columns []string
	// Values is a row's values for Columns.
	Values func(T) []any
	// Scan reads a row whose first columns are seq, at_ms, prev_digest and
	// digest, into head, and then Columns.
	Scan func(rows *sql.Rows, head []any) (T, error)
	// Canonical is a row's canonical bytes (api.ChainCanonical) at its seq
	// and time.
	Canonical func(seq, atMs int64, row T) []byte
}

// chainLink is where a row sits in its chain.
type chainLink struct {
	seq, atMs    int64
	prev, digest string
}

// chains are the chains ChainHead and VerifyChain know, by name.
var chains = map[string]chainEntry{
	api.ChainAudit:   entry(auditChain),
	api.ChainHistory: entry(historyChain),
}

// chainEntry is a Chain with its row type put away.
type chainEntry struct {
	table  string
	verify func(ctx context.Context, s *Store, from *store.ChainHead) (store.ChainReport, error)
}

func entry[T any](c Chain[T]) chainEntry {
	return chainEntry{table: c.Table, verify: func(ctx context.Context, s *Store, from *store.ChainHead) (store.ChainReport, error) {
		return verifyChain(ctx, s, c, from)
	}}
}

// appendChain appends rows to c in tx, after the chain's head, all stamped
// with one time by the database clock, and moves the head. It returns the
// new head.
func appendChain[T any](ctx context.Context, s *Store, tx *sql.Tx, c Chain[T], rows []T) (store.ChainHead, error) {
	head, atMs, err := s.lockChain(ctx, tx, c.Name)
	if err != nil || len(rows) == 0 {
		return head, err
	}
	cols := append(append([]string{}, c.Columns...), "at_ms", "seq", "prev_digest", "digest")
	per := max(1, min(256, 30000/len(cols)))
	one := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	prev, seq := head.Digest, head.Seq
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), per)]
		rows = rows[len(chunk):]
		args := make([]any, 0, len(cols)*len(chunk))
		for _, r := range chunk {
			seq++
			digest := api.ChainDigest(prev, c.Canonical(seq, atMs, r))
			args = append(append(args, c.Values(r)...), atMs, seq, prev, digest)
			prev = digest
		}
		values := strings.TrimSuffix(strings.Repeat(one+", ", len(chunk)), ", ")
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO `+c.Table+` (`+strings.Join(cols, ", ")+`) VALUES `+values), args...); err != nil {
			return head, s.wrap("append to the "+c.Name+" chain", err)
		}
	}
	if _, err := tx.ExecContext(ctx, s.q(`UPDATE chain_heads SET seq = ?, digest = ? WHERE chain = ?`), seq, prev, c.Name); err != nil {
		return head, s.wrap("move the "+c.Name+" chain's head", err)
	}
	return store.ChainHead{Chain: c.Name, Seq: seq, Digest: prev, At: msTime(atMs)}, nil
}

// lockChain locks a chain's head row until tx ends, creating it (at the
// genesis) for a chain's first row, and reads it with the database's now.
func (s *Store) lockChain(ctx context.Context, tx *sql.Tx, chain string) (store.ChainHead, int64, error) {
	h := store.ChainHead{Chain: chain}
	var atMs int64
	read := s.sql(`SELECT seq, digest, NOW FROM chain_heads WHERE chain = ?` + s.d.ForUpdate)
	err := tx.QueryRowContext(ctx, read, chain).Scan(&h.Seq, &h.Digest, &atMs)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err := tx.ExecContext(ctx, s.q(`INSERT INTO chain_heads (chain, seq, digest, anchor_seq, anchor_digest) VALUES (?, 0, ?, 0, ?) ON CONFLICT (chain) DO NOTHING`), chain, api.ChainGenesis, api.ChainGenesis); err != nil {
			return h, 0, s.wrap("create the "+chain+" chain", err)
		}
		err = tx.QueryRowContext(ctx, read, chain).Scan(&h.Seq, &h.Digest, &atMs)
	}
	return h, atMs, s.wrap("lock the "+chain+" chain", err)
}

// chainState reads a chain's head and anchor; a chain with no row yet is
// at the genesis.
func chainState(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, s *Store, chain string) (head, anchor store.ChainHead, err error) {
	head, anchor = store.ChainHead{Chain: chain, Digest: api.ChainGenesis}, store.ChainHead{Chain: chain, Digest: api.ChainGenesis}
	err = q.QueryRowContext(ctx, s.q(`SELECT seq, digest, anchor_seq, anchor_digest FROM chain_heads WHERE chain = ?`), chain).
		Scan(&head.Seq, &head.Digest, &anchor.Seq, &anchor.Digest)
	if errors.Is(err, sql.ErrNoRows) {
		err = nil
	}
	return head, anchor, s.wrap("read the "+chain+" chain's head", err)
}

// ChainHead returns a chain's head.
func (s *Store) ChainHead(ctx context.Context, chain string) (store.ChainHead, error) {
	c, ok := chains[chain]
	if !ok {
		return store.ChainHead{}, store.ErrNotFound
	}
	head, _, err := chainState(ctx, s.reads, s, chain)
	if err != nil || head.Seq == 0 {
		return head, err
	}
	var at sql.NullInt64
	// The table is the chain's; only the head row's time is read.
	err = s.reads.QueryRowContext(ctx, s.q(`SELECT at_ms FROM `+c.table+` WHERE seq = ?`), head.Seq).Scan(&at)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return head, s.wrap("read the "+chain+" chain's head", err)
	}
	if at.Valid {
		head.At = msTime(at.Int64)
	}
	return head, nil
}

// VerifyChain recomputes a chain (store.Store).
func (s *Store) VerifyChain(ctx context.Context, chain string, from *store.ChainHead) (store.ChainReport, error) {
	c, ok := chains[chain]
	if !ok {
		return store.ChainReport{}, store.ErrNotFound
	}
	return c.verify(ctx, s, from)
}

// pruneChain deletes, in tx, the rows of c older than retention by the
// database clock, as a prefix of the chain: from the oldest row up to the
// last one before the first row within the retention. The last row it
// prunes becomes the chain's anchor, in the same transaction, so that the
// chain stays verifiable from the oldest row kept (docs/audit.md,
// "Pruning"). keepWhere, when not "", is an SQL condition (with keepArgs)
// a row must meet to be deleted: the others stay, before the anchor. Rows
// with no seq (written before the table was chained) are deleted by age
// alone. It returns how many rows it deleted.
func pruneChain[T any](ctx context.Context, s *Store, tx *sql.Tx, c Chain[T], retention time.Duration, keepWhere string, keepArgs ...any) (int64, error) {
	head, now, err := s.lockChain(ctx, tx, c.Name)
	if err != nil {
		return 0, err
	}
	_, anchor, err := chainState(ctx, tx, s, c.Name)
	if err != nil {
		return 0, err
	}
	cutoff := now - retention.Milliseconds()
	var first sql.NullInt64
	if err := tx.QueryRowContext(ctx, s.q(`SELECT MIN(seq) FROM `+c.Table+` WHERE seq > ? AND at_ms >= ?`), anchor.Seq, cutoff).Scan(&first); err != nil {
		return 0, s.wrap("prune the "+c.Name+" chain", err)
	}
	last := head.Seq
	if first.Valid {
		last = first.Int64 - 1
	}
	if last > anchor.Seq {
		var digest string
		err := tx.QueryRowContext(ctx, s.q(`SELECT digest FROM `+c.Table+` WHERE seq = ?`), last).Scan(&digest)
		if errors.Is(err, sql.ErrNoRows) {
			return 0, fmt.Errorf("%s: prune the %s chain: its row seq %d is missing, so no anchor can be recorded: verify the chain", s.d.Name, c.Name, last)
		}
		if err != nil {
			return 0, s.wrap("prune the "+c.Name+" chain", err)
		}
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE chain_heads SET anchor_seq = ?, anchor_digest = ? WHERE chain = ?`), last, digest, c.Name); err != nil {
			return 0, s.wrap("prune the "+c.Name+" chain", err)
		}
	}
	query := `DELETE FROM ` + c.Table + ` WHERE (seq <= ? OR seq IS NULL) AND at_ms < ?`
	args := []any{max(last, anchor.Seq), cutoff}
	if keepWhere != "" {
		query += ` AND ` + keepWhere
		args = append(args, keepArgs...)
	}
	res, err := tx.ExecContext(ctx, s.q(query), args...)
	if err != nil {
		return 0, s.wrap("prune the "+c.Name+" chain", err)
	}
	n, err := res.RowsAffected()
	return n, s.wrap("prune the "+c.Name+" chain", err)
}

// verifyPage is how many rows verifyChain reads at a time.
const verifyPage = 5000

// verifyChain walks c from a checkpoint (or the anchor) to the head, a page
// at a time in seq order, in one read transaction so that the rows and
// the head are one snapshot.
func verifyChain[T any](ctx context.Context, s *Store, c Chain[T], from *store.ChainHead) (store.ChainReport, error) {
	tx, err := s.reads.BeginTx(ctx, &sql.TxOptions{ReadOnly: true, Isolation: sql.LevelRepeatableRead})
	if err != nil {
		return store.ChainReport{}, s.wrap("verify the "+c.Name+" chain", err)
	}
	defer tx.Rollback()
	head, anchor, err := chainState(ctx, tx, s, c.Name)
	if err != nil {
		return store.ChainReport{}, err
	}
	rep := store.ChainReport{From: anchor, Head: head}
	problem := func(seq int64, format string, args ...any) (store.ChainReport, error) {
		rep.Problem = &store.ChainProblem{Seq: seq, Why: fmt.Sprintf(format, args...)}
		return rep, nil
	}
	read := func(afterSeq, untilSeq int64, limit int) ([]chainLink, []T, error) {
		return readChain(ctx, s, tx, c, afterSeq, untilSeq, limit)
	}
	// Rows kept before the anchor (events never pruned) are no longer
	// linked to their neighbours; each must still match its own prev.
	var kept []chainLink
	var keptRows []T
	if anchor.Seq > 0 {
		if kept, keptRows, err = read(0, anchor.Seq, 0); err != nil {
			return rep, err
		}
	}
	for i, l := range kept {
		if api.ChainDigest(l.prev, c.Canonical(l.seq, l.atMs, keptRows[i])) != l.digest {
			return problem(l.seq, "its digest does not match its content: the row was edited")
		}
	}
	if from != nil {
		switch {
		case from.Chain != "" && from.Chain != c.Name:
			return problem(from.Seq, "the checkpoint is of the %s chain, not the %s chain", from.Chain, c.Name)
		case from.Seq < anchor.Seq:
			return problem(from.Seq, "the checkpoint's row was pruned: the chain is kept from seq %d on; verify from a later checkpoint, or from the oldest row kept", anchor.Seq+1)
		case from.Seq > head.Seq:
			return problem(head.Seq+1, "the chain ends at seq %d, before the checkpoint's seq %d: rows were removed from its end", head.Seq, from.Seq)
		case from.Seq == anchor.Seq:
			if from.Digest != anchor.Digest {
				return problem(from.Seq, "the chain's anchor at seq %d is not the checkpoint's digest: the chain was rewritten", from.Seq)
			}
		default:
			at, atRows, err := read(from.Seq-1, from.Seq, 1)
			if err != nil {
				return rep, err
			}
			if len(at) == 0 || at[0].seq != from.Seq {
				return problem(from.Seq, "the checkpoint's row is missing: a row was removed")
			}
			if at[0].digest != from.Digest || api.ChainDigest(at[0].prev, c.Canonical(at[0].seq, at[0].atMs, atRows[0])) != from.Digest {
				return problem(from.Seq, "the row is not the checkpoint's: the chain was rewritten since the checkpoint was taken")
			}
		}
		rep.From = store.ChainHead{Chain: c.Name, Seq: from.Seq, Digest: from.Digest}
	}
	prev, want := rep.From.Digest, rep.From.Seq+1
	for {
		links, rows, err := read(want-1, 0, verifyPage)
		if err != nil {
			return rep, err
		}
		for i, l := range links {
			switch {
			case l.seq != want:
				return problem(want, "the row is missing (the next row is seq %d): a row was removed, or its seq changed", l.seq)
			case l.prev != prev:
				return problem(l.seq, "its prev is not the digest of the row before: a row was removed, added or moved")
			case api.ChainDigest(l.prev, c.Canonical(l.seq, l.atMs, rows[i])) != l.digest:
				return problem(l.seq, "its digest does not match its content: the row was edited")
			}
			prev, want = l.digest, want+1
			rep.Rows++
		}
		if len(links) < verifyPage {
			break
		}
	}
	switch last := want - 1; {
	case last < head.Seq:
		return problem(last+1, "the chain ends at seq %d but its head is seq %d: rows were removed from its end", last, head.Seq)
	case last > head.Seq:
		return problem(head.Seq+1, "rows follow the chain's head (seq %d): rows were added outside the chain", head.Seq)
	case prev != head.Digest:
		return problem(last, "the row's digest is not the chain's head: the chain was rewritten")
	}
	return rep, nil
}

// readChain reads up to limit rows of c (0: every row), in seq order, after
// afterSeq and up to untilSeq (0: to the end).
func readChain[T any](ctx context.Context, s *Store, tx *sql.Tx, c Chain[T], afterSeq, untilSeq int64, limit int) ([]chainLink, []T, error) {
	if untilSeq != 0 && untilSeq <= afterSeq {
		return nil, nil, nil
	}
	query := `SELECT seq, at_ms, prev_digest, digest, ` + strings.Join(c.Columns, ", ") + ` FROM ` + c.Table + ` WHERE seq > ?`
	args := []any{afterSeq}
	if untilSeq != 0 {
		query += ` AND seq <= ?`
		args = append(args, untilSeq)
	}
	query += ` ORDER BY seq`
	if limit > 0 {
		query += ` LIMIT ?`
		args = append(args, limit)
	}
	rows, err := tx.QueryContext(ctx, s.q(query), args...)
	if err != nil {
		return nil, nil, s.wrap("read the "+c.Name+" chain", err)
	}
	defer rows.Close()
	var links []chainLink
	var out []T
	for rows.Next() {
		var l chainLink
		var prev, digest sql.NullString
		r, err := c.Scan(rows, []any{&l.seq, &l.atMs, &prev, &digest})
		if err != nil {
			return nil, nil, s.wrap("read the "+c.Name+" chain", err)
		}
		l.prev, l.digest = prev.String, digest.String
		links, out = append(links, l), append(out, r)
	}
	return links, out, s.wrap("read the "+c.Name+" chain", rows.Err())
}
