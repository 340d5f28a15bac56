-- GET /v1/devices is paged (?after=, ?limit=) in its order, oldest first:
-- a page is one range of this index, never a sort of the owner's devices.
DROP INDEX devices_by_owner;
CREATE INDEX devices_by_owner ON devices (owner_id, created_ms, id);
