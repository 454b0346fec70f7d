-- Workers' heartbeats: each executing engine's, written when it starts and every third of its
-- lease term, removed when it closes cleanly (`flowtide workers` lists them).
--
-- (No min_reader_version line: code of an earlier version may not open a database that has it,
-- whatever the migrations between allow.)

CREATE TABLE workers (
    worker_id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    last_seen INTEGER NOT NULL,
    lease_ttl REAL NOT NULL,
    runs_held INTEGER NOT NULL,
    -- JSON: the node ids it implements; run id -> the node ids it lacks to drive that run.
    nodes TEXT NOT NULL,
    waiting TEXT NOT NULL
);
