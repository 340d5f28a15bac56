-- The key of the replicas' requests to each other. The first
-- replica on the registry stores it; every later one reads it. One row.
CREATE TABLE cluster_secret (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    secret     TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
