-- The first schema of the SQLite store.
-- min_reader_version: 1
--
-- Instants are INTEGER microseconds since the Unix epoch (UTC). What a store keeps as JSON
-- (state values, token and event data, payloads, results, options, checkpoints, documents) is
-- JSON text; a field that may be absent holds the text 'null'.

-- Which schema versions this database has had applied, and the lowest version of the code that
-- may still read it.
CREATE TABLE flowtide_schema (
    version INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    min_reader_version INTEGER NOT NULL,
    applied_at TEXT NOT NULL
);

-- One row per run: its record, its lease and its wake instant. `ended` and `runnable` say what
-- the lifecycle means for its wake instant (they are written with the lifecycle).
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    flow_id TEXT NOT NULL,
    flow_version TEXT NOT NULL,
    lifecycle TEXT NOT NULL,
    ended INTEGER NOT NULL,
    runnable INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    deadline INTEGER,
    started_at INTEGER,
    finished_at INTEGER,
    parent_run_id TEXT,
    parent_token_id TEXT,
    depth INTEGER NOT NULL,
    outcome TEXT,
    result TEXT NOT NULL,
    options TEXT NOT NULL,
    checkpoint TEXT NOT NULL,
    owner TEXT,
    epoch INTEGER NOT NULL,
    lease_expires INTEGER,
    wake_at INTEGER
);
-- Claims and next_wake read the earliest wake instants, and nothing else.
CREATE INDEX runs_by_wake ON runs (wake_at, id) WHERE wake_at IS NOT NULL;
CREATE INDEX runs_by_owner ON runs (owner) WHERE owner IS NOT NULL;
CREATE INDEX runs_by_lifecycle ON runs (lifecycle);

-- A run's state, one row per top-level key (rowid: the order keys were first set).
CREATE TABLE run_state (
    run_id TEXT NOT NULL REFERENCES runs (id),
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    UNIQUE (run_id, key)
);

-- Tokens (rowid: the order they were first written).
CREATE TABLE tokens (
    run_id TEXT NOT NULL REFERENCES runs (id),
    id TEXT NOT NULL,
    placement TEXT NOT NULL,
    status TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    visit INTEGER NOT NULL,
    lineage TEXT NOT NULL,
    deadline INTEGER,
    due INTEGER,
    created_at INTEGER,
    data TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    UNIQUE (run_id, id)
);

-- Each run's history, numbered 1, 2, 3, ...
CREATE TABLE history (
    run_id TEXT NOT NULL REFERENCES runs (id),
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    at INTEGER NOT NULL,
    placement TEXT,
    attempt INTEGER,
    token_id TEXT,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;

-- Due entries, at most one per token and purpose. `set_order` is the rowid: each new row gets
-- one more than the highest, so it orders the entries of an instant as they were set.
CREATE TABLE due (
    set_order INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id),
    token_id TEXT NOT NULL,
    purpose TEXT NOT NULL,
    due_at INTEGER NOT NULL,
    UNIQUE (run_id, token_id, purpose)
);
-- A run's earliest entry is one probe.
CREATE INDEX due_by_instant ON due (run_id, due_at, set_order);

-- Node anchors; `item` is JSON text (null, or the item's key as a string).
CREATE TABLE anchors (
    run_id TEXT NOT NULL,
    placement TEXT NOT NULL,
    item TEXT NOT NULL,
    at INTEGER NOT NULL,
    PRIMARY KEY (run_id, placement, item)
) WITHOUT ROWID;

-- Parks (rowid: the order they were first written; closing one rewrites it in place).
CREATE TABLE parks (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    token_id TEXT NOT NULL,
    placement TEXT NOT NULL,
    visit INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    parked_at INTEGER NOT NULL,
    deadline INTEGER,
    key TEXT,
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    closed_at INTEGER,
    closed_by TEXT
);
CREATE INDEX parks_by_run ON parks (run_id);
CREATE INDEX parks_by_key ON parks (key) WHERE key IS NOT NULL;

-- The first answer to each signal idempotency key.
CREATE TABLE signal_answers (
    key TEXT PRIMARY KEY,
    run_id TEXT NOT NULL,
    answer TEXT NOT NULL
) WITHOUT ROWID;

-- Finished items of scatter visits.
CREATE TABLE scatter_items (
    run_id TEXT NOT NULL,
    progress TEXT NOT NULL,
    idx INTEGER NOT NULL,
    status TEXT NOT NULL,
    output TEXT,
    result TEXT NOT NULL,
    key TEXT NOT NULL,
    completion INTEGER NOT NULL,
    PRIMARY KEY (run_id, progress, idx)
);

-- Flow documents, by flow id and content digest.
CREATE TABLE flows (
    flow_id TEXT NOT NULL,
    digest TEXT NOT NULL,
    version TEXT NOT NULL,
    document TEXT NOT NULL,
    PRIMARY KEY (flow_id, digest)
);
