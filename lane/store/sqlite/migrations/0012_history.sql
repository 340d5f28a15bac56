-- The instruction history: one row per instruction the lane settled, written
-- by the replica that held the device's connection. Never a file's content
-- or a command's output: the summary is the command (or its digest), paths
-- and byte counts. The rows are a hash chain (docs/audit.md, "The chain"):
-- seq, at_ms, prev_digest and digest are assigned in the writing
-- transaction under the chain's lock, so a row committed later always has a
-- higher seq (a reader following seq misses none).
CREATE TABLE history (
	seq              INTEGER PRIMARY KEY,
	instruction_id   TEXT NOT NULL UNIQUE,
	identity_id      TEXT,
	api_key_id       TEXT,
	device_id        TEXT NOT NULL,
	root_session_id  TEXT,
	replica          TEXT,
	remote_addr      TEXT,
	kind             TEXT NOT NULL,
	summary          TEXT NOT NULL,
	received_ms      INTEGER NOT NULL,
	dispatched_ms    INTEGER,
	settled_ms       INTEGER NOT NULL,
	outcome          TEXT NOT NULL,
	exit_code        INTEGER,
	stdout_bytes     INTEGER NOT NULL DEFAULT 0,
	stderr_bytes     INTEGER NOT NULL DEFAULT 0,
	data_bytes       INTEGER NOT NULL DEFAULT 0,
	truncated_stdout INTEGER NOT NULL DEFAULT 0 CHECK (truncated_stdout IN (0, 1)),
	truncated_stderr INTEGER NOT NULL DEFAULT 0 CHECK (truncated_stderr IN (0, 1)),
	at_ms            INTEGER NOT NULL,
	prev_digest      TEXT,
	digest           TEXT
);
CREATE INDEX history_by_identity ON history (identity_id, seq);
CREATE INDEX history_by_device ON history (device_id, seq);
CREATE INDEX history_by_settled ON history (settled_ms);
