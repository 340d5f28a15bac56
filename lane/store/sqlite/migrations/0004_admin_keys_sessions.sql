-- An admin identity, API keys with an id, use and revocation
-- times, and §9's root-session → device bindings.
--
-- The admin of an existing registry is the identity `sema server` recorded
-- in its server.admin_created audit row (kept from pruning). A registry
-- without that row (an embedder's) gets no admin.
ALTER TABLE identities ADD COLUMN admin INTEGER NOT NULL DEFAULT 0 CHECK (admin IN (0, 1));
UPDATE identities SET admin = 1 WHERE id IN (SELECT identity_id FROM audit WHERE event = 'server.admin_created');

-- SQLite cannot add a NOT NULL UNIQUE column: the table is rebuilt. A key
-- of an existing registry gets a random id of the key_<ULID> form.
CREATE TABLE api_keys_v4 (
	digest       BLOB PRIMARY KEY CHECK (length(digest) = 32),
	id           TEXT NOT NULL UNIQUE,
	identity_id  TEXT NOT NULL REFERENCES identities (id),
	created_ms   INTEGER NOT NULL,
	last_used_ms INTEGER,
	revoked_ms   INTEGER
);
INSERT INTO api_keys_v4 (digest, id, identity_id, created_ms)
	SELECT digest, 'key_0' || hex(randomblob(12)) || '0', identity_id, created_ms FROM api_keys;
DROP TABLE api_keys;
ALTER TABLE api_keys_v4 RENAME TO api_keys;
CREATE INDEX api_keys_by_identity ON api_keys (identity_id, created_ms);

-- §9: a root session is bound to one device, per owner: two identities
-- never share (or learn of) each other's session ids.
CREATE TABLE sessions (
	owner_id        TEXT NOT NULL REFERENCES identities (id),
	root_session_id TEXT NOT NULL,
	device_id       TEXT NOT NULL REFERENCES devices (id),
	bound_ms        INTEGER NOT NULL,
	PRIMARY KEY (owner_id, root_session_id)
);
