-- The namenode's group commit in one call: a PL/pgSQL function keeps the plans of its
-- statements cached, skips the parts a group does not use, and costs one round trip.
-- The parts touch disjoint rows (the namenode's locks guarantee it); order matters only
-- for the foreign keys: new inodes before entries and extents naming them, entries and
-- extents removed before their inodes. Returns the touched directories' new rows.
CREATE FUNCTION apply_group(
    up_ino bigint[], up_kind smallint[], up_mode integer[], up_uid bigint[], up_gid bigint[],
    up_size bigint[], up_mtime_ns bigint[], up_ctime_ns bigint[], up_nlink integer[],
    up_replication smallint[], up_blocksize integer[], up_version bigint[], up_target text[],
    unlink_parent bigint[], unlink_name text[],
    link_parent bigint[], link_name text[], link_ino bigint[],
    removed_ino bigint[],
    touch_ino bigint[], touch_mtime_ns bigint[], touch_nlink_delta integer[],
    drop_ino bigint[], drop_file_index bigint[], drop_datanode integer[],
    add_ino bigint[], add_file_index bigint[], add_datanode integer[], add_block_start bigint[],
    add_block_count bigint[],
    rel_datanode integer[], rel_block_start bigint[], rel_block_count bigint[],
    rel_reusable_after timestamptz
) RETURNS SETOF inodes
LANGUAGE plpgsql AS $$
BEGIN
    IF cardinality(up_ino) > 0 THEN
        INSERT INTO inodes (ino, kind, mode, uid, gid, size, mtime_ns, ctime_ns, nlink,
                            replication, blocksize, version, target)
        SELECT * FROM unnest(up_ino, up_kind, up_mode, up_uid, up_gid, up_size, up_mtime_ns,
                             up_ctime_ns, up_nlink, up_replication, up_blocksize, up_version,
                             up_target)
        ON CONFLICT ON CONSTRAINT inodes_pkey DO UPDATE SET
            kind = EXCLUDED.kind, mode = EXCLUDED.mode, uid = EXCLUDED.uid, gid = EXCLUDED.gid,
            size = EXCLUDED.size, mtime_ns = EXCLUDED.mtime_ns, ctime_ns = EXCLUDED.ctime_ns,
            nlink = EXCLUDED.nlink, replication = EXCLUDED.replication,
            blocksize = EXCLUDED.blocksize, version = EXCLUDED.version, target = EXCLUDED.target;
    END IF;
    IF cardinality(drop_ino) > 0 THEN
        DELETE FROM extents x
        USING unnest(drop_ino, drop_file_index, drop_datanode) AS d(ino, file_index, datanode)
        WHERE x.ino = d.ino AND x.file_index = d.file_index AND x.datanode_id = d.datanode;
    END IF;
    IF cardinality(add_ino) > 0 THEN
        INSERT INTO extents (ino, file_index, datanode_id, block_start, block_count)
        SELECT * FROM unnest(add_ino, add_file_index, add_datanode, add_block_start,
                             add_block_count);
    END IF;
    IF cardinality(rel_datanode) > 0 THEN
        INSERT INTO released_extents (datanode_id, block_start, block_count, reusable_after)
        SELECT d, s, c, rel_reusable_after
        FROM unnest(rel_datanode, rel_block_start, rel_block_count) AS r(d, s, c)
        ON CONFLICT ON CONSTRAINT released_extents_pkey DO UPDATE SET
            block_count = EXCLUDED.block_count, reusable_after = EXCLUDED.reusable_after;
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
