-- Datanodes, their free space, and files' block lists as extents.
-- A file's extent maps file blocks [file_index, file_index + block_count) to blocks
-- [block_start, block_start + block_count) of one datanode's volume; a range with
-- replication N has N rows, one per datanode (the primary key keeps them distinct).
CREATE TABLE datanodes (
    datanode_id     integer GENERATED ALWAYS AS IDENTITY,
    identity        uuid    NOT NULL,
    host            text    NOT NULL,
    address         text    NOT NULL,
    blocksize       integer NOT NULL,
    capacity_blocks bigint  NOT NULL,
    state           text    NOT NULL DEFAULT 'live',
    registered_at   timestamptz NOT NULL DEFAULT now(),
    last_heartbeat  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT datanodes_pkey PRIMARY KEY (datanode_id),
    CONSTRAINT datanodes_identity_key UNIQUE (identity),
    CONSTRAINT datanodes_state_check CHECK (state IN ('live', 'dead', 'decommissioned')),
    CONSTRAINT datanodes_capacity_check CHECK (capacity_blocks >= 0)
);

CREATE TABLE free_extents (
    datanode_id integer NOT NULL,
    block_start bigint  NOT NULL,
    block_count bigint  NOT NULL,
    CONSTRAINT free_extents_pkey PRIMARY KEY (datanode_id, block_start),
    CONSTRAINT free_extents_datanode_fkey FOREIGN KEY (datanode_id) REFERENCES datanodes (datanode_id),
    CONSTRAINT free_extents_range_check CHECK (block_start >= 0 AND block_count > 0)
);

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
