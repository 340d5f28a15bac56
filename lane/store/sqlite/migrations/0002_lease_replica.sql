-- The replica (one lane server process) holding a device's connection
-- lease, so that a replica shutting down releases all of its leases in one
-- statement.
ALTER TABLE devices ADD COLUMN lease_replica TEXT;
