-- Datanodes, files' block lists as extents, released blocks waiting to be reused, and the
-- cluster's fixed settings.
--
-- Free space is not stored as such: a datanode's free blocks are those no extent and no
-- released range names, so a crash can never leak or double-book a block. The namenode
-- derives its in-memory free lists from these tables at start.
CREATE TABLE cluster_settings (
    singleton     boolean NOT NULL DEFAULT true,
    blocksize     integer NOT NULL,
    ticket_secret bytea   NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT cluster_settings_pkey PRIMARY KEY (singleton),
    CONSTRAINT cluster_settings_singleton_check CHECK (singleton),
    CONSTRAINT cluster_settings_blocksize_check CHECK (
        blocksize BETWEEN 65536 AND 67108864 AND blocksize & (blocksize - 1) = 0
    ),
    CONSTRAINT cluster_settings_secret_check CHECK (octet_length(ticket_secret) >= 32)
);

CREATE TABLE datanodes (
    datanode_id     integer GENERATED ALWAYS AS IDENTITY,
    identity        uuid    NOT NULL,
    host            text    NOT NULL,
    address         text    NOT NULL,
    local_socket    text    NOT NULL DEFAULT '',
    blocksize       integer NOT NULL,
    capacity_blocks bigint  NOT NULL,
    registered_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT datanodes_pkey PRIMARY KEY (datanode_id),
    CONSTRAINT datanodes_identity_key UNIQUE (identity),
    CONSTRAINT datanodes_capacity_check CHECK (capacity_blocks > 0)
);

-- File blocks [file_index, file_index + block_count) stored at blocks
-- [block_start, block_start + block_count) of one datanode; a range with replication N
-- has N rows, one per datanode (the primary key keeps replicas on distinct datanodes).
CREATE TABLE extents (
    ino         bigint  NOT NULL,
    file_index  bigint  NOT NULL,
    datanode_id integer NOT NULL,
    block_start bigint  NOT NULL,
    block_count bigint  NOT NULL,
    CONSTRAINT extents_pkey PRIMARY KEY (ino, file_index, datanode_id),
    CONSTRAINT extents_ino_fkey FOREIGN KEY (ino) REFERENCES inodes (ino),
    CONSTRAINT extents_datanode_fkey FOREIGN KEY (datanode_id) REFERENCES datanodes (datanode_id),
    CONSTRAINT extents_range_check CHECK (file_index >= 0 AND block_start >= 0 AND block_count > 0)
);

CREATE INDEX extents_datanode_idx ON extents (datanode_id, block_start);

-- Blocks a commit replaced or removed: readers holding tickets may still read them, so
-- they become free only after reusable_after (the ticket lifetime later).
CREATE TABLE released_extents (
    datanode_id    integer     NOT NULL,
    block_start    bigint      NOT NULL,
    block_count    bigint      NOT NULL,
    reusable_after timestamptz NOT NULL,
    CONSTRAINT released_extents_pkey PRIMARY KEY (datanode_id, block_start),
    CONSTRAINT released_extents_datanode_fkey FOREIGN KEY (datanode_id)
        REFERENCES datanodes (datanode_id),
    CONSTRAINT released_extents_range_check CHECK (block_start >= 0 AND block_count > 0)
);
