-- S3 access keys (the S3 gateway): an access key id names a user; its secret is what
-- AWS Signature Version 4 signs with, so it cannot be kept as a hash. It is kept sealed
-- (AES-256-GCM, the access key id and uid as associated data) with a key that lives in
-- a file beside each namenode (s3_secret_file), never in the database: a dump or a
-- backup of the database holds no usable secret. Revoked keys stay, so that a refusal
-- can say why; removing the user removes them.
CREATE TABLE s3_keys (
    access_key_id text COLLATE "C" NOT NULL,
    uid           bigint      NOT NULL,
    secret_sealed bytea       NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    revoked_at    timestamptz,
    CONSTRAINT s3_keys_pkey PRIMARY KEY (access_key_id),
    CONSTRAINT s3_keys_uid_fkey FOREIGN KEY (uid) REFERENCES users (uid) ON DELETE CASCADE,
    CONSTRAINT s3_keys_access_key_id_check CHECK (access_key_id ~ '^PFS[A-Z2-7]{17}$')
);
COMMENT ON COLUMN s3_keys.secret_sealed IS 'nonce (12 bytes) then AES-256-GCM of the secret';
COMMENT ON COLUMN s3_keys.revoked_at IS 'NULL: not revoked';

CREATE INDEX s3_keys_uid_idx ON s3_keys (uid);
