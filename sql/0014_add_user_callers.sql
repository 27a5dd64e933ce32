-- The local uids a user's connections may act for (a mount with -o callers passes on
-- each request the uid, gid and groups of the process that made it): none when NULL.
-- A superuser acts for every uid without it.
ALTER TABLE users
    ADD COLUMN callers_first_uid bigint,
    ADD COLUMN callers_last_uid bigint,
    ADD CONSTRAINT users_callers_check CHECK (
        (callers_first_uid IS NULL) = (callers_last_uid IS NULL)
        AND callers_first_uid >= 0
        AND callers_first_uid <= callers_last_uid
        AND callers_last_uid <= 4294967295
    );
