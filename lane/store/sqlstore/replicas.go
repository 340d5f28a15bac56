package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/sema-agent/sema/lane/store"
)

// RegisterReplica records a replica, or renews the row of one registered
// before (a process that lost its row to RemoveReplica's peer, or a
// restart reusing its id).
func (s *Store) RegisterReplica(ctx context.Context, id, advertiseURL string) error {
	if id == "" || advertiseURL == "" {
		return errors.New("sqlstore: a replica needs an id and an advertise URL")
	}
	_, err := s.db.ExecContext(ctx, s.sql(`INSERT INTO replicas (id, advertise_url, started_ms, heartbeat_ms) VALUES (?, ?, NOW, NOW)
		ON CONFLICT (id) DO UPDATE SET advertise_url = excluded.advertise_url, heartbeat_ms = excluded.heartbeat_ms, draining_ms = NULL`), id, advertiseURL)
	return s.wrap("register replica", err)
}

func (s *Store) HeartbeatReplica(ctx context.Context, id string) error {
	return s.touchReplica(ctx, "replica heartbeat", `UPDATE replicas SET heartbeat_ms = NOW WHERE id = ?`, id)
}

func (s *Store) MarkReplicaDraining(ctx context.Context, id string) error {
	return s.touchReplica(ctx, "mark replica draining", `UPDATE replicas SET draining_ms = NOW, heartbeat_ms = NOW WHERE id = ?`, id)
}

// touchReplica runs an update of one replica's row; ErrNotFound if the row
// is gone.
func (s *Store) touchReplica(ctx context.Context, op, query, id string) error {
	res, err := s.db.ExecContext(ctx, s.sql(query), id)
	if err != nil {
		return s.wrap(op, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return s.wrap(op, err)
	} else if n == 0 {
		return store.ErrNotFound
	}
	return nil
}

func (s *Store) RemoveReplica(ctx context.Context, id string) error {
	_, err := s.db.ExecContext(ctx, s.sql(`DELETE FROM replicas WHERE id = ?`), id)
	return s.wrap("remove replica", err)
}

func (s *Store) PruneReplicas(ctx context.Context, staleFor time.Duration) (int64, error) {
	res, err := s.db.ExecContext(ctx, s.sql(`DELETE FROM replicas WHERE heartbeat_ms < NOW - ?`), staleFor.Milliseconds())
	if err != nil {
		return 0, s.wrap("prune replicas", err)
	}
	n, err := res.RowsAffected()
	return n, s.wrap("prune replicas", err)
}

func (s *Store) ListReplicas(ctx context.Context, live time.Duration) ([]store.Replica, error) {
	rows, err := s.reads.QueryContext(ctx, s.sql(`SELECT id, advertise_url, started_ms, heartbeat_ms, draining_ms, heartbeat_ms >= NOW - ? FROM replicas ORDER BY started_ms, id`), live.Milliseconds())
	if err != nil {
		return nil, s.wrap("list replicas", err)
	}
	return collect(rows, scanReplica, s.wrapper("list replicas"))
}

func scanReplica(row scanner) (store.Replica, error) {
	var (
		r                  store.Replica
		started, heartbeat int64
		draining           sql.NullInt64
	)
	if err := row.Scan(&r.ID, &r.AdvertiseURL, &started, &heartbeat, &draining, &r.Live); err != nil {
		return r, err
	}
	r.StartedAt, r.HeartbeatAt, r.DrainingAt = msTime(started), msTime(heartbeat), nullMsTime(draining)
	return r, nil
}

// ClusterSecrets stores candidate unless a secret is stored, and returns
// the one that is, with the one a rotation replaced.
func (s *Store) ClusterSecrets(ctx context.Context, candidate string) (store.ClusterSecrets, error) {
	var out store.ClusterSecrets
	if candidate == "" {
		return out, errors.New("sqlstore: a cluster secret candidate is required")
	}
	if _, err := s.db.ExecContext(ctx, s.sql(`INSERT INTO cluster_secret (id, secret, created_ms) VALUES (1, ?, NOW) ON CONFLICT (id) DO NOTHING`), candidate); err != nil {
		return out, s.wrap("store the cluster secret", err)
	}
	var (
		previous sql.NullString
		ago      sql.NullInt64
	)
	err := s.db.QueryRowContext(ctx, s.sql(`SELECT secret, previous, NOW - rotated_ms FROM cluster_secret WHERE id = 1`)).Scan(&out.Current, &previous, &ago)
	out.Previous, out.RotatedAgo = previous.String, time.Duration(ago.Int64)*time.Millisecond
	return out, s.wrap("read the cluster secret", err)
}

// RotateClusterSecret makes next the cluster secret, keeping the current
// one as the previous.
func (s *Store) RotateClusterSecret(ctx context.Context, next string) error {
	if len(next) < 32 {
		return errors.New("sqlstore: a cluster secret is at least 32 bytes")
	}
	res, err := s.db.ExecContext(ctx, s.sql(`UPDATE cluster_secret SET previous = secret, secret = ?, rotated_ms = NOW WHERE id = 1`), next)
	if err != nil {
		return s.wrap("rotate the cluster secret", err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return store.ErrNotFound
	}
	return nil
}
