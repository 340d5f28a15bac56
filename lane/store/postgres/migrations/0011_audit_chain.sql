-- The audit trail is hash-chained (docs/audit.md, "The chain"): each row
-- carries its place in the chain, the digest of the row before and its own.
-- Rows written before this migration keep NULL there: they stand outside
-- the chain, which begins with the first row written after it.
ALTER TABLE audit ADD COLUMN seq BIGINT;
ALTER TABLE audit ADD COLUMN prev_digest TEXT;
ALTER TABLE audit ADD COLUMN digest TEXT;
CREATE UNIQUE INDEX audit_by_seq ON audit (seq);

-- One row per chain: its head (the last row's seq and digest), locked by
-- every append so that writers never fork the chain, and its anchor (the
-- seq and digest of the last row pruned; 0 and the genesis before any),
-- where verifying starts.
CREATE TABLE chain_heads (
	chain         TEXT PRIMARY KEY,
	seq           BIGINT NOT NULL,
	digest        TEXT NOT NULL,
	anchor_seq    BIGINT NOT NULL,
	anchor_digest TEXT NOT NULL
);
