-- A rotated cluster secret: the one it replaced stays in previous, so that
-- the replicas move to the new one in phases (lane/cluster.go) without a
-- hop refused between them; rotated_ms is when, by the database clock.
ALTER TABLE cluster_secret ADD COLUMN previous TEXT;
ALTER TABLE cluster_secret ADD COLUMN rotated_ms BIGINT;
