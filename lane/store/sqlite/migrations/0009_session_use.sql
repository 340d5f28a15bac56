-- A root session's binding records when it was last used (at most once an
-- hour), so that bindings idle longer than the lane's session expiry are
-- pruned and the per-identity cap counts the sessions still in use.
ALTER TABLE sessions ADD COLUMN used_ms INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET used_ms = bound_ms;
CREATE INDEX sessions_used ON sessions (used_ms);
