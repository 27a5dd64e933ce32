-- A row whose update, committed with synchronous_commit on, makes every commit before
-- it durable too (the WAL is flushed in order): the namenode's Sync request and its
-- flush after commits acknowledged before their WAL flush (Commit.relaxed).
CREATE TABLE durability_barrier (
    id integer CONSTRAINT durability_barrier_pkey PRIMARY KEY CHECK (id = 1),
    flushes bigint NOT NULL
);
INSERT INTO durability_barrier VALUES (1, 0);
