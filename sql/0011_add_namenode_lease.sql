-- The active namenode holds a lease it renews: `lease_expires` is PostgreSQL's clock
-- (now() + the lease's length at each renewal). A standby takes the next term only
-- once the lease has expired, so the active one's liveness never depends on
-- PostgreSQL noticing a dead TCP peer; the term still fences every group commit.
-- `holder` names the process that took the term (a fresh id per start), and
-- `holder_address` where it serves clients, for standbys and operators to show.
ALTER TABLE namenode_terms
    ADD COLUMN holder text NOT NULL DEFAULT '',
    ADD COLUMN holder_address text NOT NULL DEFAULT '',
    ADD COLUMN lease_expires timestamptz NOT NULL DEFAULT '-infinity';
