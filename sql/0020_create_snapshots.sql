-- Snapshots (namenode/snapshots.py): read-only images of a directory's tree. A
-- snapshot's files and directories are ordinary inodes, entries and extents, numbered
-- from their own sequence at 2^62 and up so that a number alone says it is read-only;
-- their extents name the same blocks as the live files' did (blocks are shared, never
-- copied). A directory's snapshots hang below one hidden directory of its own (the
-- `DIR/.snapshot` a path reaches), which no entry names: this table links them. No
-- foreign keys to inodes: each would be one more check for every inode removed anywhere
-- (the namenode removes no directory with snapshots, and a snapshot's rows with it).
CREATE SEQUENCE snapshot_inode_numbers START WITH 4611686018427387904 MINVALUE 4611686018427387904;

CREATE TABLE snapshots (
    dir_ino     bigint NOT NULL,
    name        text   NOT NULL,
    snapdir_ino bigint NOT NULL,
    root_ino    bigint NOT NULL,
    created_ns  bigint NOT NULL,
    inodes      bigint NOT NULL,
    CONSTRAINT snapshots_pkey PRIMARY KEY (dir_ino, name),
    CONSTRAINT snapshots_root_key UNIQUE (root_ino),
    CONSTRAINT snapshots_name_check CHECK (octet_length(name) BETWEEN 1 AND 255
        AND name NOT IN ('.', '..') AND strpos(name, '/') = 0)
);
COMMENT ON COLUMN snapshots.snapdir_ino IS 'the hidden directory holding every snapshot of dir_ino';
COMMENT ON COLUMN snapshots.inodes IS 'inodes the snapshot holds, its root and snapdir excluded';
