-- Accounts: groups, users, group membership, and the bearer credentials users present.
-- The namenode is their only writer and keeps them all in memory; a standby reads them
-- when it takes over. Names follow the portable login-name rule of useradd; ids fit the
-- uid and gid columns of inodes.
CREATE TABLE groups (
    gid  bigint NOT NULL,
    name text COLLATE "C" NOT NULL,
    CONSTRAINT groups_pkey PRIMARY KEY (gid),
    CONSTRAINT groups_name_key UNIQUE (name),
    CONSTRAINT groups_gid_check CHECK (gid BETWEEN 0 AND 4294967295),
    CONSTRAINT groups_name_check CHECK (name ~ '^[a-z_][a-z0-9_.-]{0,31}$')
);

-- A user's primary group cannot be dropped while the user exists (no cascade): files
-- would be left with a gid nobody can name, and the user with no group.
CREATE TABLE users (
    uid        bigint      NOT NULL,
    name       text COLLATE "C" NOT NULL,
    gid        bigint      NOT NULL,
    superuser  boolean     NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_pkey PRIMARY KEY (uid),
    CONSTRAINT users_name_key UNIQUE (name),
    CONSTRAINT users_gid_fkey FOREIGN KEY (gid) REFERENCES groups (gid),
    CONSTRAINT users_uid_check CHECK (uid BETWEEN 0 AND 4294967295),
    CONSTRAINT users_name_check CHECK (name ~ '^[a-z_][a-z0-9_.-]{0,31}$')
);
COMMENT ON COLUMN users.superuser IS 'passes every permission check (uid 0 alone does not)';

CREATE INDEX users_gid_idx ON users (gid);

-- Supplementary groups; a user is also a member of its primary group without a row here.
CREATE TABLE group_members (
    gid bigint NOT NULL,
    uid bigint NOT NULL,
    CONSTRAINT group_members_pkey PRIMARY KEY (gid, uid),
    CONSTRAINT group_members_gid_fkey FOREIGN KEY (gid) REFERENCES groups (gid)
        ON DELETE CASCADE,
    CONSTRAINT group_members_uid_fkey FOREIGN KEY (uid) REFERENCES users (uid)
        ON DELETE CASCADE
);

CREATE INDEX group_members_uid_idx ON group_members (uid);

-- Bearer tokens `pfs1.<credential_id>.<secret>`: only the SHA-256 of the secret is kept.
-- The secret is 32 random bytes, so a slow password hash would add nothing. Revoked
-- credentials stay (with revoked_at) so that refusals can say why and datanodes can be
-- told; removing the user removes them.
CREATE TABLE credentials (
    credential_id bigint      GENERATED ALWAYS AS IDENTITY,
    uid           bigint      NOT NULL,
    secret_sha256 bytea       NOT NULL,
    label         text        NOT NULL DEFAULT '',
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz,
    revoked_at    timestamptz,
    CONSTRAINT credentials_pkey PRIMARY KEY (credential_id),
    CONSTRAINT credentials_uid_fkey FOREIGN KEY (uid) REFERENCES users (uid) ON DELETE CASCADE,
    CONSTRAINT credentials_secret_check CHECK (octet_length(secret_sha256) = 32),
    CONSTRAINT credentials_label_check CHECK (char_length(label) <= 200)
);
COMMENT ON COLUMN credentials.expires_at IS 'NULL: never expires';
COMMENT ON COLUMN credentials.revoked_at IS 'NULL: not revoked';

CREATE INDEX credentials_uid_idx ON credentials (uid);
