-- An admin identity, API keys with an id, use and revocation
-- times, and §9's root-session → device bindings.
--
-- The admin of an existing registry is the identity `sema server` recorded
-- in its server.admin_created audit row (kept from pruning). A registry
-- without that row (an embedder's) gets no admin.
ALTER TABLE identities ADD COLUMN admin BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE identities SET admin = TRUE WHERE id IN (SELECT identity_id FROM audit WHERE event = 'server.admin_created');

-- A key of an existing registry gets a random id of the key_<ULID> form.
ALTER TABLE api_keys ADD COLUMN id TEXT;
ALTER TABLE api_keys ADD COLUMN last_used_ms BIGINT;
ALTER TABLE api_keys ADD COLUMN revoked_ms BIGINT;
UPDATE api_keys SET id = 'key_0' || upper(substr(md5(random()::text || clock_timestamp()::text), 1, 24)) || '0';
ALTER TABLE api_keys ALTER COLUMN id SET NOT NULL;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_id_key UNIQUE (id);
CREATE INDEX api_keys_by_identity ON api_keys (identity_id, created_ms);

-- §9: a root session is bound to one device, per owner: two identities
-- never share (or learn of) each other's session ids.
CREATE TABLE sessions (
	owner_id        TEXT NOT NULL REFERENCES identities (id),
	root_session_id TEXT NOT NULL,
	device_id       TEXT NOT NULL REFERENCES devices (id),
	bound_ms        BIGINT NOT NULL,
	PRIMARY KEY (owner_id, root_session_id)
);
