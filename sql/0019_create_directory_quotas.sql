-- Directory quotas: at most so many entries (the directory itself counted, as HDFS's
-- name quota does) and so many bytes of space with replication in a directory's tree.
-- The namenode keeps every directory's usage in memory and checks a commit against
-- these limits; removing the directory removes its quota.
CREATE TABLE directory_quotas (
    ino         bigint NOT NULL,
    max_entries bigint,
    max_space   bigint,
    CONSTRAINT directory_quotas_pkey PRIMARY KEY (ino),
    CONSTRAINT directory_quotas_ino_fkey FOREIGN KEY (ino) REFERENCES inodes (ino)
        ON DELETE CASCADE,
    CONSTRAINT directory_quotas_max_entries_check CHECK (max_entries >= 1),
    CONSTRAINT directory_quotas_max_space_check CHECK (max_space >= 0),
    CONSTRAINT directory_quotas_some_limit_check
        CHECK (max_entries IS NOT NULL OR max_space IS NOT NULL)
);
COMMENT ON COLUMN directory_quotas.max_entries IS 'NULL: no limit on entries';
COMMENT ON COLUMN directory_quotas.max_space IS 'NULL: no limit on space';
