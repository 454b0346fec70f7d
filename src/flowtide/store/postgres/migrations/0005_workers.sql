-- Workers' heartbeats: each executing engine's, written when it starts and every third of its
-- lease term, removed when it closes cleanly (`flowtide workers` lists them).
--
-- (No min_reader_version line: code of an earlier version may not open a database that has it,
-- whatever the migrations between allow.)

CREATE TABLE workers (
    worker_id TEXT COLLATE "C" PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at TIMESTAMPTZ NOT NULL,
    last_seen TIMESTAMPTZ NOT NULL,
    lease_ttl DOUBLE PRECISION NOT NULL,
    runs_held INTEGER NOT NULL,
    -- The node ids it implements; run id -> the node ids it lacks to drive that run.
    nodes JSON NOT NULL,
    waiting JSON NOT NULL
);
