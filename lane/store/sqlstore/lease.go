package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// AcquireLease takes a device's connection lease and bumps its generation.
func (s *Store) AcquireLease(ctx context.Context, req store.LeaseRequest) (store.Lease, error) {
	out, err := s.AcquireLeases(ctx, []store.LeaseRequest{req})
	if err != nil {
		return store.Lease{DeviceID: req.DeviceID, Holder: req.Holder, Epoch: req.Epoch}, err
	}
	return out[0].Lease, out[0].Err
}

// AcquireLeases takes many leases in one transaction, each decided as
// AcquireLease decides it, its two statements prepared once for the batch.
// The rows are visited in device id order, so two replicas' batches lock
// them in the same order and never deadlock.
func (s *Store) AcquireLeases(ctx context.Context, reqs []store.LeaseRequest) ([]store.LeaseOutcome, error) {
	out := make([]store.LeaseOutcome, len(reqs))
	order := make([]int, len(reqs))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(reqs[a].DeviceID, reqs[b].DeviceID) })
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		read, err := tx.PrepareContext(ctx, s.sql(`SELECT revoked_ms, generation, lease_holder, lease_epoch, lease_replica, lease_expires_ms, NOW FROM devices WHERE id = ?`+s.d.ForUpdate))
		if err != nil {
			return s.wrap("read lease", err)
		}
		defer read.Close()
		take, err := tx.PrepareContext(ctx, s.sql(`UPDATE devices SET generation = generation + 1, lease_holder = ?, lease_epoch = ?, lease_replica = ?, lease_expires_ms = NOW + ? WHERE id = ? RETURNING generation, lease_expires_ms`))
		if err != nil {
			return s.wrap("take lease", err)
		}
		defer take.Close()
		for _, i := range order {
			out[i].Lease, out[i].Err = s.acquireOne(ctx, read, take, reqs[i])
			if out[i].Err != nil && !store.IsLeaseRefusal(out[i].Err) {
				return out[i].Err // the database failed: the whole batch goes
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// acquireOne decides one request inside AcquireLeases' transaction.
func (s *Store) acquireOne(ctx context.Context, read, take *sql.Stmt, req store.LeaseRequest) (store.Lease, error) {
	lease := store.Lease{DeviceID: req.DeviceID, Holder: req.Holder, Epoch: req.Epoch}
	var (
		revoked       sql.NullInt64
		gen, now      int64
		holder, epoch sql.NullString
		replica       sql.NullString
		expires       sql.NullInt64
	)
	err := read.QueryRowContext(ctx, req.DeviceID).Scan(&revoked, &gen, &holder, &epoch, &replica, &expires, &now)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return lease, store.ErrNotFound
	case err != nil:
		return lease, s.wrap("read lease", err)
	case revoked.Valid:
		return lease, store.ErrRevoked
	}
	lease.Previous, lease.PreviousEpoch, lease.PreviousReplica = holder.String, epoch.String, replica.String
	if holder.Valid && holder.String != req.Holder && holder.String != req.Takeover && expires.Int64 > now {
		return lease, store.ErrLeaseHeld
	}
	var newExpires int64
	err = take.QueryRowContext(ctx, req.Holder, req.Epoch, nullString(req.Replica), req.TTL.Milliseconds(), req.DeviceID).Scan(&gen, &newExpires)
	if err != nil {
		return lease, s.wrap("take lease", err)
	}
	lease.Gen, lease.ExpiresAt = uint64(gen), msTime(newExpires)
	return lease, nil
}

// RenewLease extends a holder's lease by ttl from the database's now.
func (s *Store) RenewLease(ctx context.Context, deviceID, holder string, ttl time.Duration) (store.Lease, error) {
	lease := store.Lease{DeviceID: deviceID, Holder: holder}
	var gen, expires int64
	err := s.db.QueryRowContext(ctx, s.sql(`UPDATE devices SET lease_expires_ms = NOW + ? WHERE id = ? AND lease_holder = ? AND revoked_ms IS NULL RETURNING generation, lease_epoch, lease_expires_ms`),
		ttl.Milliseconds(), deviceID, holder).Scan(&gen, &lease.Epoch, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return lease, store.ErrLeaseLost
	}
	if err != nil {
		return lease, s.wrap("renew lease", err)
	}
	lease.Gen, lease.ExpiresAt = uint64(gen), msTime(expires)
	return lease, nil
}

// noLease is the SET clause that drops a lease.
const noLease = `lease_holder = NULL, lease_epoch = NULL, lease_replica = NULL, lease_expires_ms = NULL`

// ReleaseLease drops a holder's lease.
func (s *Store) ReleaseLease(ctx context.Context, deviceID, holder string) error {
	_, err := s.db.ExecContext(ctx, s.sql(`UPDATE devices SET `+noLease+` WHERE id = ? AND lease_holder = ?`), deviceID, holder)
	return s.wrap("release lease", err)
}

// ReleaseReplicaLeases drops every lease a replica holds, in one statement.
// A successor's lease names its own replica (AcquireLease rewrites the
// column with the holder), so it is never matched.
func (s *Store) ReleaseReplicaLeases(ctx context.Context, replica string) (int64, error) {
	if replica == "" {
		return 0, fmt.Errorf("%s: release replica leases: no replica named", s.d.Name)
	}
	res, err := s.db.ExecContext(ctx, s.sql(`UPDATE devices SET `+noLease+` WHERE lease_replica = ?`), replica)
	if err != nil {
		return 0, s.wrap("release replica leases", err)
	}
	n, err := res.RowsAffected()
	return n, s.wrap("release replica leases", err)
}

// ReleaseAllLeases drops every lease in the registry, and says how many.
// Only a store served by one process may: a process that holds the
// registry's only way in (SQLite, its data dir locked) knows that every
// lease recorded before it started is a dead process's — kept, a device
// would be refused already_connected until the lease expired.
func (s *Store) ReleaseAllLeases(ctx context.Context) (int64, error) {
	if !s.oneProcess {
		return 0, fmt.Errorf("%s: release all leases: other processes may hold them", s.d.Name)
	}
	res, err := s.db.ExecContext(ctx, s.sql(`UPDATE devices SET `+noLease+` WHERE lease_holder IS NOT NULL`))
	if err != nil {
		return 0, s.wrap("release all leases", err)
	}
	n, err := res.RowsAffected()
	return n, s.wrap("release all leases", err)
}

// RenewReplicaLeases renews every live lease a replica holds, in one
// statement: the heartbeat path does not write the registry.
func (s *Store) RenewReplicaLeases(ctx context.Context, replica string, ttl time.Duration) ([]store.HeldLease, error) {
	if replica == "" {
		return nil, fmt.Errorf("%s: renew replica leases: no replica named", s.d.Name)
	}
	rows, err := s.db.QueryContext(ctx, s.sql(`UPDATE devices SET lease_expires_ms = NOW + ? WHERE lease_replica = ? AND revoked_ms IS NULL RETURNING id, lease_holder`),
		ttl.Milliseconds(), replica)
	if err != nil {
		return nil, s.wrap("renew replica leases", err)
	}
	defer rows.Close()
	var held []store.HeldLease
	for rows.Next() {
		var l store.HeldLease
		if err := rows.Scan(&l.DeviceID, &l.Holder); err != nil {
			return nil, s.wrap("renew replica leases", err)
		}
		held = append(held, l)
	}
	return held, s.wrap("renew replica leases", rows.Err())
}
