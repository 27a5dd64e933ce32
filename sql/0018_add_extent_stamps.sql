-- Blocks that moved from one file to another (a concatenation: namenode/concat.py,
-- the S3 gateway's multipart uploads) keep the owner stamp their datanodes wrote with
-- them (sql/0012): the file and block index they were written for. stamp_ino is that
-- file (0: the extent's own file) and stamp_shift what to add to the extent's
-- file_index to get the stamped index (0 for blocks written where they are). A shift,
-- not an index, so that the head and tail of a split extent keep it unchanged.
ALTER TABLE extents ADD COLUMN stamp_ino bigint NOT NULL DEFAULT 0;
ALTER TABLE extents ADD COLUMN stamp_shift bigint NOT NULL DEFAULT 0;

-- The group commit writes the new columns with the rest of the row.
DROP FUNCTION apply_group(
    bigint, bigint[], smallint[], integer[], bigint[], bigint[], bigint[], bigint[],
    bigint[], integer[], smallint[], integer[], bigint[], text[], bytea[], bigint[],
    bytea[], bigint[], text[], bigint[], text[], bigint[], bigint[], bigint[], bigint[],
    integer[], bigint[], bigint[], integer[], bigint[], bigint[], integer[], bigint[],
    bigint[], bigint[], integer[], bigint[], bigint[], timestamptz[], integer[], bigint[],
    bigint[]);

CREATE FUNCTION apply_group(
    p_term bigint,
    up_ino bigint[], up_kind smallint[], up_mode integer[], up_uid bigint[], up_gid bigint[],
    up_size bigint[], up_mtime_ns bigint[], up_ctime_ns bigint[], up_nlink integer[],
    up_replication smallint[], up_blocksize integer[], up_version bigint[], up_target text[],
    up_data bytea[], up_rdev bigint[], up_xattrs bytea[],
    unlink_parent bigint[], unlink_name text[],
    link_parent bigint[], link_name text[], link_ino bigint[],
    removed_ino bigint[],
    touch_ino bigint[], touch_mtime_ns bigint[], touch_nlink_delta integer[],
    drop_ino bigint[], drop_file_index bigint[], drop_datanode integer[],
    add_ino bigint[], add_file_index bigint[], add_datanode integer[], add_block_start bigint[],
    add_block_count bigint[], add_generation bigint[], add_stamp_ino bigint[],
    add_stamp_shift bigint[],
    rel_datanode integer[], rel_block_start bigint[], rel_block_count bigint[],
    rel_reusable_after timestamptz[],
    held_datanode integer[], held_block_start bigint[], held_block_count bigint[]
) RETURNS SETOF inodes
LANGUAGE plpgsql AS $$
BEGIN
    -- A deposed namenode's group never lands: the active one's term is the only one, and
    -- the row lock taken here orders this group before a new term is taken.
    PERFORM 1 FROM namenode_terms WHERE term = p_term FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'namenode term % has ended; another namenode is active', p_term
            USING ERRCODE = 'PFS01';
    END IF;
    IF cardinality(up_ino) > 0 THEN
        INSERT INTO inodes (ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns, nlink,
                            replication, blocksize, version, target, data, rdev, xattrs)
        SELECT * FROM unnest(up_ino, up_kind, up_mode, up_uid, up_gid, up_size, up_mtime_ns,
                             up_ctime_ns, up_nlink, up_replication, up_blocksize, up_version,
                             up_target, up_data, up_rdev, up_xattrs)
        ON CONFLICT ON CONSTRAINT inodes_pkey DO UPDATE SET
            kind = EXCLUDED.kind, mode = EXCLUDED.mode, uid = EXCLUDED.uid, gid = EXCLUDED.gid,
            size = EXCLUDED.size, mtime_ns = EXCLUDED.mtime_ns, ctime_ns = EXCLUDED.ctime_ns,
            nlink = EXCLUDED.nlink, replication = EXCLUDED.replication,
            blocksize = EXCLUDED.blocksize, version = EXCLUDED.version, target = EXCLUDED.target,
            data = EXCLUDED.data, rdev = EXCLUDED.rdev, xattrs = EXCLUDED.xattrs;
    END IF;
    IF cardinality(drop_ino) > 0 THEN
        DELETE FROM extents x
        USING unnest(drop_ino, drop_file_index, drop_datanode) AS d(ino, file_index, datanode)
        WHERE x.ino = d.ino AND x.file_index = d.file_index AND x.datanode_id = d.datanode;
    END IF;
    IF cardinality(add_ino) > 0 THEN
        INSERT INTO extents (ino, file_index, datanode_id, block_start, block_count,
                             generation, stamp_ino, stamp_shift)
        SELECT * FROM unnest(add_ino, add_file_index, add_datanode, add_block_start,
                             add_block_count, add_generation, add_stamp_ino,
                             add_stamp_shift);
    END IF;
    IF cardinality(rel_datanode) > 0 THEN
        INSERT INTO released_extents (datanode_id, block_start, block_count, reusable_after)
        SELECT * FROM unnest(rel_datanode, rel_block_start, rel_block_count,
                             rel_reusable_after)
        ON CONFLICT ON CONSTRAINT released_extents_pkey DO UPDATE SET
            block_count = EXCLUDED.block_count, reusable_after = EXCLUDED.reusable_after;
    END IF;
    IF cardinality(held_datanode) > 0 THEN
        INSERT INTO released_extents (datanode_id, block_start, block_count, reusable_after)
        SELECT d, s, c, 'infinity'
        FROM unnest(held_datanode, held_block_start, held_block_count) AS r(d, s, c)
        ON CONFLICT ON CONSTRAINT released_extents_pkey DO UPDATE SET
            block_count = EXCLUDED.block_count, reusable_after = EXCLUDED.reusable_after;
    END IF;
    IF (cardinality(rel_datanode) > 0 OR cardinality(held_datanode) > 0)
       AND EXISTS (SELECT 1 FROM corrupt_blocks) THEN
        DELETE FROM corrupt_blocks b
        USING (SELECT * FROM unnest(rel_datanode, rel_block_start, rel_block_count)
               UNION ALL
               SELECT * FROM unnest(held_datanode, held_block_start, held_block_count))
              AS r(d, s, c)
        WHERE b.datanode_id = r.d AND b.block_start >= r.s AND b.block_start < r.s + r.c;
    END IF;
    IF cardinality(unlink_parent) > 0 THEN
        DELETE FROM entries e
        USING unnest(unlink_parent, unlink_name) AS d(parent, name)
        WHERE e.parent = d.parent AND e.name = d.name COLLATE "C";
    END IF;
    IF cardinality(link_parent) > 0 THEN
        INSERT INTO entries (parent, name, ino)
        SELECT * FROM unnest(link_parent, link_name, link_ino)
        ON CONFLICT ON CONSTRAINT entries_pkey DO UPDATE SET ino = EXCLUDED.ino;
    END IF;
    IF cardinality(removed_ino) > 0 THEN
        DELETE FROM inodes WHERE ino = ANY(removed_ino);
    END IF;
    IF cardinality(touch_ino) > 0 THEN
        RETURN QUERY
        UPDATE inodes i SET
            mtime_ns = greatest(i.mtime_ns, t.mtime_ns),
            ctime_ns = greatest(i.ctime_ns, t.mtime_ns),
            nlink = i.nlink + t.nlink_delta,
            version = i.version + 1
        FROM unnest(touch_ino, touch_mtime_ns, touch_nlink_delta) AS t(ino, mtime_ns, nlink_delta)
        WHERE i.ino = t.ino
        RETURNING i.*;
    END IF;
END
$$;
