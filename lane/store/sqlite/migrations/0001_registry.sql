-- Identities, API keys (SHA-256 digests only), enrollment tokens (digests
-- only), devices with their generation counter and connection lease, audit.
CREATE TABLE identities (
	id         TEXT PRIMARY KEY,
	name       TEXT NOT NULL,
	created_ms INTEGER NOT NULL
);

CREATE TABLE api_keys (
	digest      BLOB PRIMARY KEY CHECK (length(digest) = 32),
	identity_id TEXT NOT NULL REFERENCES identities (id),
	created_ms  INTEGER NOT NULL
);

CREATE TABLE enroll_tokens (
	digest          BLOB PRIMARY KEY CHECK (length(digest) = 32),
	identity_id     TEXT NOT NULL REFERENCES identities (id),
	created_ms      INTEGER NOT NULL,
	expires_ms      INTEGER NOT NULL,
	consumed_pubkey BLOB CHECK (consumed_pubkey IS NULL OR length(consumed_pubkey) = 32),
	device_id       TEXT
);

CREATE TABLE devices (
	id               TEXT PRIMARY KEY,
	owner_id         TEXT NOT NULL REFERENCES identities (id),
	pubkey           BLOB NOT NULL CHECK (length(pubkey) = 32),
	platform_os      TEXT NOT NULL CHECK (platform_os IN ('darwin', 'linux')),
	platform_arch    TEXT NOT NULL,
	display_name     TEXT NOT NULL,
	workspace_root   TEXT NOT NULL,
	created_ms       INTEGER NOT NULL,
	revoked_ms       INTEGER,
	generation       INTEGER NOT NULL DEFAULT 0,
	lease_holder     TEXT,
	lease_epoch      TEXT,
	lease_expires_ms INTEGER
);
CREATE INDEX devices_by_owner ON devices (owner_id, created_ms);

CREATE TABLE audit (
	id          INTEGER PRIMARY KEY AUTOINCREMENT,
	at_ms       INTEGER NOT NULL,
	identity_id TEXT,
	device_id   TEXT,
	event       TEXT NOT NULL,
	reason      TEXT
);
CREATE INDEX audit_by_device ON audit (device_id, id);
CREATE INDEX audit_by_identity ON audit (identity_id, id);
