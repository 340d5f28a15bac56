-- An identity can be disabled (every key of it refused at once) and
-- enabled again, and its name is unique on the lane. Names made twice
-- before this keep the oldest as they are; the others get their id
-- appended, so that no identity is lost and the index holds.
ALTER TABLE identities ADD COLUMN disabled_ms INTEGER;
UPDATE identities SET name = name || '-' || id
	WHERE id NOT IN (SELECT MIN(id) FROM identities GROUP BY name);
CREATE UNIQUE INDEX identities_by_name ON identities (name);
