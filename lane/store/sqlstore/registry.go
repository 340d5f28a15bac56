package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/store"
)

// CreateEnrollToken stores a token digest expiring ttl after the database's now.
func (s *Store) CreateEnrollToken(ctx context.Context, identityID string, digest store.Digest, ttl time.Duration) (store.EnrollToken, error) {
	var expires int64
	err := s.db.QueryRowContext(ctx, s.sql(`INSERT INTO enroll_tokens (digest, identity_id, created_ms, expires_ms) VALUES (?, ?, NOW, NOW + ?) RETURNING expires_ms`),
		digest[:], identityID, ttl.Milliseconds()).Scan(&expires)
	if err != nil {
		return store.EnrollToken{}, s.wrap("create enroll token", err)
	}
	return store.EnrollToken{IdentityID: identityID, ExpiresAt: msTime(expires), TTL: ttl}, nil
}

// IdentityByEnrollToken is the identity the token was issued to, while it
// has not expired.
func (s *Store) IdentityByEnrollToken(ctx context.Context, digest store.Digest) (store.Identity, error) {
	idn, err := scanIdentity(s.db.QueryRowContext(ctx, s.sql(`SELECT i.id, i.name, i.created_ms, i.admin, i.disabled_ms FROM enroll_tokens t JOIN identities i ON i.id = t.identity_id WHERE t.digest = ? AND t.expires_ms > NOW AND i.disabled_ms IS NULL`), digest[:]))
	return idn, s.wrap("identity by enroll token", err)
}

// RegisterDevice consumes a token for a key and creates the device (§1.1),
// or returns the device a replay with the same key created.
func (s *Store) RegisterDevice(ctx context.Context, r store.Registration) (store.Device, bool, error) {
	var dev store.Device
	created := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var (
			owner             string
			expires, now      int64
			consumedKey       []byte
			consumedForDevice sql.NullString
		)
		err := tx.QueryRowContext(ctx, s.sql(`SELECT identity_id, expires_ms, consumed_pubkey, device_id, NOW FROM enroll_tokens WHERE digest = ?`+s.d.ForUpdate), r.TokenDigest[:]).
			Scan(&owner, &expires, &consumedKey, &consumedForDevice, &now)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return &store.EnrollRefusedError{Reason: store.RefusedUnknownToken}
		case err != nil:
			return s.wrap("read enroll token", err)
		case owner != r.IdentityID:
			return &store.EnrollRefusedError{Reason: store.RefusedWrongIdentity}
		case consumedKey != nil && bytes.Equal(consumedKey, r.PublicKey):
			// A replay after a lost response: the same device, nothing new.
			dev, err = s.device(ctx, tx, consumedForDevice.String)
			return err
		case consumedKey != nil:
			return &store.EnrollRefusedError{Reason: store.RefusedTokenReuse}
		case now >= expires:
			return &store.EnrollRefusedError{Reason: store.RefusedExpired}
		}
		id := ids.New(ids.Device)
		_, err = tx.ExecContext(ctx, s.sql(`INSERT INTO devices (id, owner_id, pubkey, platform_os, platform_arch, display_name, workspace_root, created_ms, generation) VALUES (?, ?, ?, ?, ?, ?, ?, NOW, 0)`),
			id, r.IdentityID, r.PublicKey, r.PlatformOS, r.PlatformArch, r.DisplayName, r.WorkspaceRoot)
		if err != nil {
			return s.wrap("insert device", err)
		}
		if _, err := tx.ExecContext(ctx, s.sql(`UPDATE enroll_tokens SET consumed_pubkey = ?, device_id = ? WHERE digest = ?`), r.PublicKey, id, r.TokenDigest[:]); err != nil {
			return s.wrap("consume enroll token", err)
		}
		created = true
		dev, err = s.device(ctx, tx, id)
		return err
	})
	return dev, created, err
}

// deviceColumns ends with the lease: its replica, and whether it is live
// by the database clock.
const deviceColumns = `id, owner_id, pubkey, platform_os, platform_arch, display_name, workspace_root, created_ms, revoked_ms, generation, lease_holder, lease_replica, lease_expires_ms > NOW`

type scanner interface{ Scan(...any) error }

func scanDevice(row scanner) (store.Device, error) {
	var (
		d       store.Device
		created int64
		revoked sql.NullInt64
		gen     int64
		holder  sql.NullString
		replica sql.NullString
		live    sql.NullBool
	)
	err := row.Scan(&d.ID, &d.OwnerID, &d.PublicKey, &d.PlatformOS, &d.PlatformArch, &d.DisplayName, &d.WorkspaceRoot, &created, &revoked, &gen, &holder, &replica, &live)
	if errors.Is(err, sql.ErrNoRows) {
		return d, store.ErrNotFound
	}
	d.CreatedAt, d.RevokedAt, d.Generation = msTime(created), nullMsTime(revoked), uint64(gen)
	if holder.Valid && live.Valid && live.Bool {
		d.Leased, d.LeaseReplica = true, replica.String
	}
	return d, err
}

type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) device(ctx context.Context, q querier, id string) (store.Device, error) {
	d, err := scanDevice(q.QueryRowContext(ctx, s.sql(`SELECT `+deviceColumns+` FROM devices WHERE id = ?`), id))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return d, s.wrap("read device", err)
	}
	return d, err
}

// Device returns a device by id.
func (s *Store) Device(ctx context.Context, id string) (store.Device, error) {
	d, err := scanDevice(s.deviceByID.QueryRowContext(ctx, id))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return d, s.wrap("read device", err)
	}
	return d, err
}

// ListDevices returns a page of an owner's devices, oldest first: the
// devices after page.After in (created_ms, id) order, a range of the
// devices_by_owner index.
func (s *Store) ListDevices(ctx context.Context, ownerID string, page store.DevicePage) ([]store.Device, error) {
	query, args := `SELECT `+deviceColumns+` FROM devices WHERE owner_id = ?`, []any{ownerID}
	if page.After != "" {
		var created int64
		err := s.reads.QueryRowContext(ctx, s.sql(`SELECT created_ms FROM devices WHERE id = ? AND owner_id = ?`), page.After, ownerID).Scan(&created)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil, store.ErrNotFound
		case err != nil:
			return nil, s.wrap("list devices", err)
		}
		// Devices are never deleted, so the cursor's place never moves.
		query, args = query+` AND (created_ms, id) > (?, ?)`, append(args, created, page.After)
	}
	query += ` ORDER BY created_ms, id`
	if page.Limit > 0 {
		query, args = query+` LIMIT ?`, append(args, page.Limit)
	}
	rows, err := s.reads.QueryContext(ctx, s.sql(query), args...)
	if err != nil {
		return nil, s.wrap("list devices", err)
	}
	return collect(rows, scanDevice, s.wrapper("list devices"))
}

// RenameDevice sets an owner's device's display name.
func (s *Store) RenameDevice(ctx context.Context, ownerID, deviceID, name string) (store.Device, error) {
	d, err := scanDevice(s.db.QueryRowContext(ctx, s.sql(`UPDATE devices SET display_name = ?
		WHERE id = ? AND owner_id = ? RETURNING `+deviceColumns), name, deviceID, ownerID))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return d, s.wrap("rename device", err)
	}
	return d, err
}

// ForgetDevice removes a revoked device and what refers to it, in one
// transaction.
func (s *Store) ForgetDevice(ctx context.Context, ownerID, deviceID string) (store.Device, error) {
	var d store.Device
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		d, err = scanDevice(tx.QueryRowContext(ctx, s.sql(`SELECT `+deviceColumns+` FROM devices WHERE id = ?`+s.d.ForUpdate), deviceID))
		switch {
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return s.wrap("read device", err)
		case err != nil || (ownerID != "" && d.OwnerID != ownerID):
			return store.ErrNotFound
		case !d.Revoked():
			return store.ErrNotRevoked
		}
		for _, q := range []string{
			`DELETE FROM sessions WHERE device_id = ?`,
			`DELETE FROM enroll_tokens WHERE device_id = ?`,
			`DELETE FROM devices WHERE id = ?`,
		} {
			if _, err := tx.ExecContext(ctx, s.sql(q), deviceID); err != nil {
				return s.wrap("forget device", err)
			}
		}
		return nil
	})
	return d, err
}

// RevokeDevice revokes an owner's device, terminally, and drops its lease.
func (s *Store) RevokeDevice(ctx context.Context, ownerID, deviceID string) (store.Device, error) {
	// Counted once the write is over, whatever its result: a row read
	// before the count moved may predate the revocation, and is read again.
	defer s.revocations.Add(1)
	d, err := scanDevice(s.db.QueryRowContext(ctx, s.sql(`UPDATE devices SET revoked_ms = COALESCE(revoked_ms, NOW), `+noLease+`
		WHERE id = ? AND owner_id = ? RETURNING `+deviceColumns), deviceID, ownerID))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return d, s.wrap("revoke device", err)
	}
	return d, err
}
