-- Every lane server process on the registry is a replica with a
-- row of its own: the URL its peers reach it at, and a heartbeat by the
-- database clock. A device's lease names its replica (lease_replica,
-- 0002); a lease whose replica's heartbeat is stale can be taken at once.
CREATE TABLE replicas (
    id            TEXT PRIMARY KEY,
    advertise_url TEXT NOT NULL,
    started_ms    BIGINT NOT NULL,
    heartbeat_ms  BIGINT NOT NULL,
    draining_ms   BIGINT
);
