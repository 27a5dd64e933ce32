-- Inodes, directory entries and the inode number sequence; the root directory is inode 1.
CREATE TABLE inodes (
    ino         bigint   NOT NULL,
    kind        smallint NOT NULL,
    mode        integer  NOT NULL,
    uid         bigint   NOT NULL,
    gid         bigint   NOT NULL,
    size        bigint   NOT NULL DEFAULT 0,
    mtime_ns    bigint   NOT NULL,
    ctime_ns    bigint   NOT NULL,
    nlink       integer  NOT NULL,
    replication smallint NOT NULL,
    blocksize   integer  NOT NULL,
    version     bigint   NOT NULL DEFAULT 1,
    target      text,
    CONSTRAINT inodes_pkey PRIMARY KEY (ino),
    CONSTRAINT inodes_kind_check CHECK (kind IN (1, 2, 3)),
    CONSTRAINT inodes_mode_check CHECK (mode BETWEEN 0 AND 4095),
    CONSTRAINT inodes_owner_check CHECK (uid BETWEEN 0 AND 4294967295 AND gid BETWEEN 0 AND 4294967295),
    CONSTRAINT inodes_size_check CHECK (size >= 0),
    CONSTRAINT inodes_nlink_check CHECK (nlink >= 0),
    CONSTRAINT inodes_replication_check CHECK (replication BETWEEN 1 AND 32),
    CONSTRAINT inodes_blocksize_check CHECK (blocksize BETWEEN 65536 AND 67108864),
    CONSTRAINT inodes_target_check CHECK ((kind = 3) = (target IS NOT NULL))
);

CREATE TABLE entries (
    parent bigint NOT NULL,
    name   text COLLATE "C" NOT NULL,
    ino    bigint NOT NULL,
    CONSTRAINT entries_pkey PRIMARY KEY (parent, name),
    CONSTRAINT entries_parent_fkey FOREIGN KEY (parent) REFERENCES inodes (ino),
    CONSTRAINT entries_ino_fkey FOREIGN KEY (ino) REFERENCES inodes (ino),
    CONSTRAINT entries_name_check CHECK (
        octet_length(name) BETWEEN 1 AND 255
        AND name NOT IN ('.', '..')
        AND strpos(name, '/') = 0
    )
);

CREATE INDEX entries_ino_idx ON entries (ino);

-- The namenode reserves inode numbers 1024 at a time: nextval() = first of the run.
CREATE SEQUENCE inode_numbers START WITH 2 INCREMENT BY 1024;

INSERT INTO inodes (ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns, nlink, replication, blocksize)
VALUES (1, 2, 493, 0, 0, 0,
        (extract(epoch FROM clock_timestamp()) * 1e9)::bigint,
        (extract(epoch FROM clock_timestamp()) * 1e9)::bigint,
        2, 1, 1048576);
