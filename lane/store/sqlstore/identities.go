package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/sema-agent/sema/internal/ids"
	"github.com/sema-agent/sema/lane/store"
)

const identityColumns = `id, name, created_ms, admin, disabled_ms`

func scanIdentity(row scanner) (store.Identity, error) {
	var (
		idn      store.Identity
		created  int64
		disabled sql.NullInt64
	)
	err := row.Scan(&idn.ID, &idn.Name, &created, &idn.Admin, &disabled)
	if errors.Is(err, sql.ErrNoRows) {
		return idn, store.ErrNotFound
	}
	idn.CreatedAt = msTime(created)
	if disabled.Valid {
		t := msTime(disabled.Int64)
		idn.DisabledAt = &t
	}
	return idn, err
}

// CreateIdentity adds an identity that is not an admin; ErrNameTaken when
// the name is another identity's.
func (s *Store) CreateIdentity(ctx context.Context, name string) (store.Identity, error) {
	idn, err := s.createIdentity(ctx, name, false)
	if err != nil {
		var taken bool
		if s.reads.QueryRowContext(ctx, s.sql(`SELECT EXISTS (SELECT 1 FROM identities WHERE name = ?)`), name).Scan(&taken) == nil && taken {
			return store.Identity{}, store.ErrNameTaken
		}
	}
	return idn, err
}

// SetIdentityDisabled disables an identity (its keys are refused from the
// next request on, also by a store that remembers keys) or enables it
// again. The admin cannot be disabled: ErrAdminNotDisabled.
func (s *Store) SetIdentityDisabled(ctx context.Context, id string, disabled bool) (store.Identity, error) {
	idn, err := scanIdentity(s.db.QueryRowContext(ctx, s.sql(`SELECT `+identityColumns+` FROM identities WHERE id = ?`), id))
	if err != nil {
		return idn, s.wrap("disable identity", err)
	}
	if idn.Admin && disabled {
		return idn, store.ErrAdminNotDisabled
	}
	q := `UPDATE identities SET disabled_ms = NULL WHERE id = ? RETURNING ` + identityColumns
	if disabled {
		q = `UPDATE identities SET disabled_ms = COALESCE(disabled_ms, NOW) WHERE id = ? RETURNING ` + identityColumns
	}
	idn, err = scanIdentity(s.db.QueryRowContext(ctx, s.sql(q), id))
	if s.keys != nil {
		s.keys.forget() // even on an error: whether it took effect is not known
	}
	return idn, s.wrap("disable identity", err)
}

// CreateAdminIdentity adds an identity marked as the lane's admin.
func (s *Store) CreateAdminIdentity(ctx context.Context, name string) (store.Identity, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return store.Identity{}, s.wrap("create admin identity", err)
	}
	defer tx.Rollback()
	// Replicas starting at once on an empty registry each ask for the
	// admin: the lock (PostgreSQL's advisory lock; SQLite's one writer)
	// lets one of them look and create while the others wait, then find it.
	if s.d.MigrationLock != "" {
		if _, err := tx.ExecContext(ctx, s.d.MigrationLock); err != nil {
			return store.Identity{}, s.wrap("create admin identity", err)
		}
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, s.sql(`SELECT EXISTS (SELECT 1 FROM identities WHERE admin)`)).Scan(&exists); err != nil {
		return store.Identity{}, s.wrap("create admin identity", err)
	}
	if exists {
		return store.Identity{}, store.ErrAdminExists
	}
	idn, err := scanIdentity(tx.QueryRowContext(ctx, s.sql(`INSERT INTO identities (id, name, created_ms, admin) VALUES (?, ?, NOW, ?) RETURNING `+identityColumns),
		ids.New(ids.Identity), name, true))
	if err != nil {
		return idn, s.wrap("create admin identity", err)
	}
	return idn, s.wrap("create admin identity", tx.Commit())
}

func (s *Store) createIdentity(ctx context.Context, name string, admin bool) (store.Identity, error) {
	idn, err := scanIdentity(s.db.QueryRowContext(ctx, s.sql(`INSERT INTO identities (id, name, created_ms, admin) VALUES (?, ?, NOW, ?) RETURNING `+identityColumns),
		ids.New(ids.Identity), name, admin))
	return idn, s.wrap("create identity", err)
}

// ListIdentities returns every identity, oldest first.
func (s *Store) ListIdentities(ctx context.Context) ([]store.Identity, error) {
	rows, err := s.reads.QueryContext(ctx, s.sql(`SELECT `+identityColumns+` FROM identities ORDER BY created_ms, id`))
	if err != nil {
		return nil, s.wrap("list identities", err)
	}
	return collect(rows, scanIdentity, s.wrapper("list identities"))
}

const apiKeyColumns = `id, identity_id, created_ms, last_used_ms, revoked_ms`

func scanAPIKey(row scanner) (store.APIKey, error) {
	var (
		k                store.APIKey
		created          int64
		lastUsed, revoke sql.NullInt64
	)
	err := row.Scan(&k.ID, &k.IdentityID, &created, &lastUsed, &revoke)
	if errors.Is(err, sql.ErrNoRows) {
		return k, store.ErrNotFound
	}
	k.CreatedAt, k.LastUsedAt, k.RevokedAt = msTime(created), nullMsTime(lastUsed), nullMsTime(revoke)
	return k, err
}

// CreateAPIKey stores the digest of an API key under a new key id.
func (s *Store) CreateAPIKey(ctx context.Context, identityID string, digest store.Digest) (store.APIKey, error) {
	k, err := scanAPIKey(s.db.QueryRowContext(ctx, s.sql(`INSERT INTO api_keys (digest, id, identity_id, created_ms) VALUES (?, ?, ?, NOW) RETURNING `+apiKeyColumns),
		digest[:], ids.New(ids.APIKey), identityID))
	return k, s.wrap("create api key", err)
}

// identityByKeyRead finds the identity of an API key's digest (prepared
// once, sqlstore.go).
const identityByKeyRead = `SELECT i.id, i.name, i.created_ms, i.admin, k.id, k.last_used_ms, NOW
	FROM api_keys k JOIN identities i ON i.id = k.identity_id WHERE k.digest = ? AND k.revoked_ms IS NULL AND i.disabled_ms IS NULL`

// IdentityByAPIKey finds the identity owning a key that is not revoked. The
// read is on the read pool; the key's use is written only when the last
// one recorded is LastUsedAtGranularity old, by the database clock. A store
// that remembers keys (ServedByOneProcess) answers from memory until then.
func (s *Store) IdentityByAPIKey(ctx context.Context, digest store.Digest) (store.Identity, error) {
	if s.keys == nil {
		idn, _, err := s.identityByAPIKey(ctx, digest)
		return idn, err
	}
	now := time.Now()
	if idn, ok := s.keys.get(digest, now); ok {
		return idn, nil
	}
	gen := s.keys.generation()
	idn, due, err := s.identityByAPIKey(ctx, digest)
	if err == nil {
		s.keys.put(gen, digest, idn, now.Add(due))
	}
	return idn, err
}

// identityByAPIKey reads the key's identity from the registry and records
// its use when due; due is how long from now its use need not be recorded.
func (s *Store) identityByAPIKey(ctx context.Context, digest store.Digest) (idn store.Identity, due time.Duration, err error) {
	var (
		created  int64
		keyID    string
		lastUsed sql.NullInt64
		now      int64
	)
	err = s.identityByKey.QueryRowContext(ctx, digest[:]).Scan(&idn.ID, &idn.Name, &created, &idn.Admin, &keyID, &lastUsed, &now)
	if errors.Is(err, sql.ErrNoRows) {
		return idn, 0, store.ErrNotFound
	}
	if err != nil {
		return idn, 0, s.wrap("identity by api key", err)
	}
	idn.CreatedAt, idn.APIKeyID = msTime(created), keyID
	granularity := store.LastUsedAtGranularity.Milliseconds()
	if lastUsed.Valid && now-lastUsed.Int64 < granularity {
		return idn, time.Duration(granularity-(now-lastUsed.Int64)) * time.Millisecond, nil
	}
	// Conditional, so that requests racing past the read write once.
	_, err = s.db.ExecContext(ctx, s.sql(`UPDATE api_keys SET last_used_ms = NOW
		WHERE id = ? AND revoked_ms IS NULL AND (last_used_ms IS NULL OR last_used_ms <= NOW - ?)`), keyID, granularity)
	if err != nil {
		return store.Identity{}, 0, s.wrap("record api key use", err)
	}
	return idn, store.LastUsedAtGranularity, nil
}

// ListAPIKeys returns an identity's keys that are not revoked, oldest first.
func (s *Store) ListAPIKeys(ctx context.Context, identityID string) ([]store.APIKey, error) {
	rows, err := s.reads.QueryContext(ctx, s.sql(`SELECT `+apiKeyColumns+` FROM api_keys
		WHERE identity_id = ? AND revoked_ms IS NULL ORDER BY created_ms, id`), identityID)
	if err != nil {
		return nil, s.wrap("list api keys", err)
	}
	return collect(rows, scanAPIKey, s.wrapper("list api keys"))
}

// RevokeAPIKey revokes a key, in a transaction that holds the owning
// identity's row, so that two revokes of an admin's last two keys cannot
// both pass the count.
func (s *Store) RevokeAPIKey(ctx context.Context, ownerID, keyID string) (store.APIKey, error) {
	var k store.APIKey
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		k, err = scanAPIKey(tx.QueryRowContext(ctx, s.sql(`SELECT `+apiKeyColumns+` FROM api_keys WHERE id = ?`), keyID))
		switch {
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return s.wrap("read api key", err)
		case err != nil || (ownerID != "" && k.IdentityID != ownerID):
			return store.ErrNotFound
		case k.RevokedAt != nil:
			return nil // revoked already: a no-op
		}
		var admin bool
		if err := tx.QueryRowContext(ctx, s.sql(`SELECT admin FROM identities WHERE id = ?`+s.d.ForUpdate), k.IdentityID).Scan(&admin); err != nil {
			return s.wrap("read identity", err)
		}
		if admin {
			var live int
			if err := tx.QueryRowContext(ctx, s.sql(`SELECT count(*) FROM api_keys WHERE identity_id = ? AND revoked_ms IS NULL`), k.IdentityID).Scan(&live); err != nil {
				return s.wrap("count api keys", err)
			}
			if live <= 1 {
				return store.ErrLastAdminKey
			}
		}
		k, err = scanAPIKey(tx.QueryRowContext(ctx, s.sql(`UPDATE api_keys SET revoked_ms = COALESCE(revoked_ms, NOW) WHERE id = ? RETURNING `+apiKeyColumns), keyID))
		return s.wrap("revoke api key", err)
	})
	if s.keys != nil {
		// Even on an error: whether a failed commit took effect is not
		// known, and the key is then read again.
		s.keys.forget()
	}
	return k, err
}

// collect scans every row with scan; wrap names the operation in an error.
func collect[T any](rows *sql.Rows, scan func(scanner) (T, error), wrap func(error) error) ([]T, error) {
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, wrap(err)
		}
		out = append(out, v)
	}
	return out, wrap(rows.Err())
}

func (s *Store) wrapper(op string) func(error) error {
	return func(err error) error { return s.wrap(op, err) }
}
