-- Audit rows name the remote address a refusal came from, and stand for
-- count identical refusals (one address, one window); pruning by age reads
-- at_ms.
ALTER TABLE audit ADD COLUMN remote_addr TEXT;
ALTER TABLE audit ADD COLUMN count INTEGER NOT NULL DEFAULT 1 CHECK (count >= 1);
CREATE INDEX audit_by_time ON audit (at_ms);
