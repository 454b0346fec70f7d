-- The SQLite store's statements, by name. Instants are INTEGER microseconds since the Unix epoch;
-- JSON values are text. Every statement that writes runs inside BEGIN IMMEDIATE ... COMMIT.
--
-- A run's wake instant (see flowtide.store.base) is written by every statement that changes
-- what it depends on: an ended run has none; a held run wakes at the earlier of its lease's
-- expiry and its earliest due entry; a runnable run nobody holds, at its creation; any other
-- run nobody holds, at its earliest due entry, if it has one.

-- -- opening ------------

-- name: schema_tables
-- The database's own tables (what tells an empty database, a Flowtide one and another one apart).
SELECT name FROM sqlite_master
WHERE type = 'table' AND name NOT LIKE 'sqlite\_%' ESCAPE '\'
ORDER BY name;

-- name: schema_version
-- The highest schema version applied, and the lowest code version that may read it.
SELECT version, min_reader_version FROM flowtide_schema ORDER BY version DESC LIMIT 1;

-- name: record_migration
INSERT INTO flowtide_schema (version, name, min_reader_version, applied_at)
VALUES (:version, :name, :min_reader_version, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));

-- -- runs ------------

-- name: run_exists
SELECT EXISTS (SELECT 1 FROM runs WHERE id = :run_id);

-- name: insert_run
INSERT INTO runs (
    id, flow_id, flow_version, lifecycle, ended, runnable, created_at, deadline, started_at,
    finished_at, parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint,
    owner, epoch, lease_expires, wake_at
) VALUES (
    :id, :flow_id, :flow_version, :lifecycle, :ended, :runnable, :created_at, :deadline,
    :started_at, :finished_at, :parent_run_id, :parent_token_id, :depth, :outcome, :result,
    :options, :checkpoint, :owner, :epoch, :lease_expires, NULL
);

-- name: write_run
-- The run record a commit writes (its lease and wake instant are not part of it).
UPDATE runs
SET flow_id = :flow_id, flow_version = :flow_version, lifecycle = :lifecycle, ended = :ended,
    runnable = :runnable, created_at = :created_at, deadline = :deadline,
    started_at = :started_at, finished_at = :finished_at, parent_run_id = :parent_run_id,
    parent_token_id = :parent_token_id, depth = :depth, outcome = :outcome, result = :result,
    options = :options, checkpoint = :checkpoint
WHERE id = :id;

-- name: run_for_request
-- What a signal request is checked against: the run's lifecycle (the write lock, held since
-- BEGIN IMMEDIATE, keeps it until the request is stored).
SELECT lifecycle FROM runs WHERE id = :run_id;

-- name: advance_run
-- The first statement of a commit: what it is checked against (the run's lifecycle and lease),
-- and the seq its events follow. (SQLite's writers take turns from BEGIN IMMEDIATE on, so the
-- last seq is read from the history's key, rather than kept on the run's row: writing the row
-- on every step was measured to cost more. PostgreSQL keeps the counter.)
SELECT lifecycle, owner, epoch,
    (SELECT coalesce(max(seq), 0) FROM history WHERE run_id = :run_id) AS last_seq
FROM runs WHERE id = :run_id;

-- name: get_run
SELECT
    id, flow_id, flow_version, lifecycle, created_at, deadline, started_at, finished_at,
    parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint
FROM runs WHERE id = :run_id;

-- name: load_run_record
-- get_run's columns, then who holds the run and at which epoch (a rebuild's first read).
SELECT
    id, flow_id, flow_version, lifecycle, created_at, deadline, started_at, finished_at,
    parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint,
    owner, epoch, lease_expires
FROM runs WHERE id = :run_id;

-- name: list_runs
SELECT
    id, flow_id, flow_version, lifecycle, created_at, deadline, started_at, finished_at,
    parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint
FROM runs ORDER BY rowid;

-- name: list_runs_by_lifecycle
SELECT
    id, flow_id, flow_version, lifecycle, created_at, deadline, started_at, finished_at,
    parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint
FROM runs WHERE lifecycle = :lifecycle ORDER BY rowid;

-- name: settle_run
-- The end of a commit: the lease given back if :release, and the wake instant brought up to date.
UPDATE runs
SET owner = CASE WHEN :release THEN NULL ELSE owner END,
    lease_expires = CASE WHEN :release THEN NULL ELSE lease_expires END,
    wake_at = CASE
        WHEN ended THEN NULL
        WHEN owner IS NOT NULL AND NOT :release THEN min(
            lease_expires,
            coalesce(
                (SELECT due_at FROM due WHERE due.run_id = runs.id ORDER BY due_at LIMIT 1),
                lease_expires
            )
        )
        WHEN runnable THEN created_at
        ELSE (SELECT due_at FROM due WHERE due.run_id = runs.id ORDER BY due_at LIMIT 1)
    END
WHERE id = :run_id;

-- -- state ------------

-- name: put_state
-- A top-level key set (a key set again keeps its place).
INSERT INTO run_state (run_id, key, value) VALUES (:run_id, :key, :value)
ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value;

-- name: delete_state
-- :keys is a JSON array of keys.
DELETE FROM run_state WHERE run_id = :run_id AND key IN (SELECT value FROM json_each(:keys));

-- name: get_state
SELECT s.key, s.value
FROM runs r LEFT JOIN run_state s ON s.run_id = r.id
WHERE r.id = :run_id
ORDER BY s.rowid;

-- -- tokens ------------

-- name: put_token
-- A token inserted or replaced (a token written again keeps its place); many tokens of a
-- commit are put by one statement (flowtide.store.multirow).
INSERT INTO tokens (
    run_id, id, placement, status, attempt, visit, lineage, deadline, due, created_at, data, epoch
) VALUES (
    :run_id, :id, :placement, :status, :attempt, :visit, :lineage, :deadline, :due,
    :created_at, :data, :epoch
)
ON CONFLICT (run_id, id) DO UPDATE
SET placement = excluded.placement, status = excluded.status, attempt = excluded.attempt,
    visit = excluded.visit, lineage = excluded.lineage, deadline = excluded.deadline,
    due = excluded.due, created_at = excluded.created_at, data = excluded.data,
    epoch = excluded.epoch;

-- name: expected_tokens
-- What a commit's expectations of tokens are checked against. :ids is a JSON array.
SELECT id, status, epoch, deadline FROM tokens
WHERE run_id = :run_id AND id IN (SELECT value FROM json_each(:ids));

-- name: tokens
SELECT
    t.id, t.placement, t.status, t.attempt, t.visit, t.lineage, t.deadline, t.due, t.created_at,
    t.data, t.epoch
FROM runs r LEFT JOIN tokens t ON t.run_id = r.id
WHERE r.id = :run_id
ORDER BY t.rowid;

-- name: tokens_by_status
-- :statuses is a JSON array of status values.
SELECT
    t.id, t.placement, t.status, t.attempt, t.visit, t.lineage, t.deadline, t.due, t.created_at,
    t.data, t.epoch
FROM runs r LEFT JOIN tokens t
    ON t.run_id = r.id AND t.status IN (SELECT value FROM json_each(:statuses))
WHERE r.id = :run_id
ORDER BY t.rowid;

-- name: token
SELECT
    t.id, t.placement, t.status, t.attempt, t.visit, t.lineage, t.deadline, t.due, t.created_at,
    t.data, t.epoch
FROM runs r LEFT JOIN tokens t ON t.run_id = r.id AND t.id = :token_id
WHERE r.id = :run_id;

-- -- history ------------

-- name: insert_event
-- (Many events of a commit are appended by one statement: flowtide.store.multirow.)
-- :seq numbered from the last seq the commit read (advance_run).
INSERT INTO history (run_id, seq, kind, at, placement, attempt, token_id, data)
VALUES (:run_id, :seq, :kind, :at, :placement, :attempt, :token_id, :data);

-- name: history
SELECT e.seq, e.kind, e.at, e.placement, e.attempt, e.token_id, e.data
FROM runs r LEFT JOIN history e ON e.run_id = r.id AND e.seq > :after
WHERE r.id = :run_id
ORDER BY e.seq;

-- name: history_after_checkpoint
-- The history after the run's resume checkpoint (all of it without one).
SELECT e.seq, e.kind, e.at, e.placement, e.attempt, e.token_id, e.data
FROM runs r LEFT JOIN history e
    ON e.run_id = r.id AND e.seq > COALESCE(json_extract(r.checkpoint, '$.seq'), 0)
WHERE r.id = :run_id
ORDER BY e.seq;

-- -- due entries ------------

-- name: clear_due
-- :token_ids is a JSON array of token ids.
DELETE FROM due
WHERE run_id = :run_id AND token_id IN (SELECT value FROM json_each(:token_ids));

-- name: drop_due
DELETE FROM due WHERE run_id = :run_id AND token_id = :token_id AND purpose = :purpose;

-- name: fire_due
-- A fired entry, removed only if it is still set for the instant it fired at.
DELETE FROM due
WHERE run_id = :run_id AND token_id = :token_id AND purpose = :purpose AND due_at = :due_at;

-- name: set_due
-- A due entry set: it replaces the token's entry of that purpose, as the newest entry.
INSERT OR REPLACE INTO due (run_id, token_id, purpose, due_at)
VALUES (:run_id, :token_id, :purpose, :due_at);

-- name: wake_due
-- A due entry set on another run than the commit's (a child's end wakes its parent), unless that
-- run has ended.
INSERT OR REPLACE INTO due (run_id, token_id, purpose, due_at)
SELECT :run_id, :token_id, :purpose, :due_at
WHERE EXISTS (SELECT 1 FROM runs WHERE id = :run_id AND NOT ended);

-- name: delete_all_due
DELETE FROM due WHERE run_id = :run_id;

-- name: delete_due_if_ended
-- After a commit that set due entries without knowing its run's lifecycle: an ended run keeps
-- none.
DELETE FROM due
WHERE run_id = :run_id AND EXISTS (SELECT 1 FROM runs WHERE id = :run_id AND ended);

-- name: due_of
SELECT d.due_at, d.token_id, d.purpose
FROM runs r LEFT JOIN due d ON d.run_id = r.id
WHERE r.id = :run_id
ORDER BY d.due_at, d.set_order;

-- -- node anchors ------------

-- name: put_anchor
INSERT OR REPLACE INTO anchors (run_id, placement, item, at)
VALUES (:run_id, :placement, :item, :at);

-- name: release_anchor
DELETE FROM anchors WHERE run_id = :run_id AND placement = :placement AND item = :item;

-- name: node_anchor
SELECT at FROM anchors WHERE run_id = :run_id AND placement = :placement AND item = :item;

-- name: node_anchors
SELECT placement, item, at FROM anchors WHERE run_id = :run_id;

-- -- scatter items ------------

-- name: put_scatter_item
INSERT OR REPLACE INTO scatter_items (
    run_id, progress, idx, status, output, result, key, completion
) VALUES (:run_id, :progress, :index, :status, :output, :result, :key, :order);

-- name: scatter_items
SELECT run_id, progress, idx, status, output, result, key, completion
FROM scatter_items WHERE run_id = :run_id AND progress = :progress ORDER BY idx;

-- -- parks ------------

-- name: put_park
-- A park inserted or replaced (a park written again, to close it, keeps its place).
INSERT INTO parks (
    id, run_id, token_id, placement, visit, epoch, parked_at, deadline, key, payload, status,
    closed_at, closed_by
) VALUES (
    :id, :run_id, :token_id, :placement, :visit, :epoch, :parked_at, :deadline, :key,
    :payload, :status, :closed_at, :closed_by
)
ON CONFLICT (id) DO UPDATE
SET run_id = excluded.run_id, token_id = excluded.token_id, placement = excluded.placement,
    visit = excluded.visit, epoch = excluded.epoch, parked_at = excluded.parked_at,
    deadline = excluded.deadline, key = excluded.key, payload = excluded.payload,
    status = excluded.status, closed_at = excluded.closed_at, closed_by = excluded.closed_by;

-- name: parks_by_run
SELECT
    id, run_id, token_id, placement, visit, epoch, parked_at, deadline, key, payload, status,
    closed_at, closed_by
FROM parks
WHERE run_id = :run_id
    AND (:placement IS NULL OR placement = :placement)
    AND (NOT :open_only OR status = :parked)
ORDER BY rowid;

-- name: parks_by_key
SELECT
    id, run_id, token_id, placement, visit, epoch, parked_at, deadline, key, payload, status,
    closed_at, closed_by
FROM parks
WHERE key = :key
    AND (:run_id IS NULL OR run_id = :run_id)
    AND (:placement IS NULL OR placement = :placement)
    AND (NOT :open_only OR status = :parked)
ORDER BY rowid;

-- -- signal answers ------------

-- name: answered_keys
-- Which of :keys (a JSON array) are answered already.
SELECT key FROM signal_answers WHERE key IN (SELECT value FROM json_each(:keys));

-- name: insert_answer
INSERT INTO signal_answers (key, run_id, answer) VALUES (:key, :run_id, :answer);

-- name: signal_answer
SELECT key, run_id, answer FROM signal_answers WHERE key = :key;

-- -- signal requests ------------

-- name: insert_request
-- A request of a run that has not ended, recorded at the instant given (SQLite has no clock of
-- its own), but no earlier than the latest deadline of the run fired. One whose id is taken
-- already (or whose run has ended, or is unknown) inserts nothing (and is refused).
INSERT INTO signal_requests (id, run_id, requested_at, request, answer, answered_at)
SELECT :id, :run_id, max(:requested_at, coalesce(deadline_fired, :requested_at)), :request,
    NULL, NULL
FROM runs WHERE id = :run_id AND NOT ended
ON CONFLICT (id) DO NOTHING
RETURNING requested_at;

-- name: unanswered_requests
-- The requests a commit answers (:ids, a JSON array), each with why it may not be (NULL: it is
-- the run's and still unanswered); one not found is unknown.
SELECT id, CASE WHEN run_id <> :run_id THEN 'unknown' WHEN answer IS NOT NULL THEN 'answered' END
FROM signal_requests WHERE id IN (SELECT value FROM json_each(:ids));

-- name: answer_request
UPDATE signal_requests SET answer = :answer, answered_at = :answered_at WHERE id = :id;

-- name: signal_request
SELECT id, run_id, requested_at, request, answer, answered_at FROM signal_requests WHERE id = :id;

-- name: pending_requests
-- A run's unanswered requests, oldest first (none once the run has ended).
SELECT r.id, r.run_id, r.requested_at, r.request, r.answer, r.answered_at
FROM signal_requests AS r JOIN runs ON runs.id = r.run_id
WHERE r.run_id = :run_id AND r.answer IS NULL AND NOT runs.ended
ORDER BY r.requested_at, r.rowid;

-- name: deadline_check
-- What a commit firing a deadline is checked against: the store's clock (none: SQLite keeps
-- the engine's), and an unanswered request of the run recorded before the deadline.
SELECT NULL, (
    SELECT id FROM signal_requests
    WHERE run_id = :run_id AND answer IS NULL AND requested_at < :at
    ORDER BY requested_at LIMIT 1
);

-- name: note_deadline_fired
-- The latest deadline of the run fired: a signal request is recorded no earlier (see
-- insert_request).
UPDATE runs SET deadline_fired = max(coalesce(deadline_fired, :at), :at) WHERE id = :run_id;

-- -- leases and wake instants ------------

-- name: next_wake
SELECT wake_at FROM runs WHERE wake_at IS NOT NULL ORDER BY wake_at LIMIT 1;

-- name: claim_runs
-- Up to :limit runs whose wake has come and that no other owner holds alive, earliest wake
-- first, taken by :owner until :expires (the next epoch unless :owner held it already), each
-- with the other owner it was taken from, if any. The runs claimable are read once, before the
-- update (MATERIALIZED), and the write lock held since BEGIN IMMEDIATE keeps them so.
WITH claimable AS MATERIALIZED (
    SELECT id, owner AS held_by FROM runs
    WHERE wake_at <= :now AND (owner IS NULL OR owner = :owner OR lease_expires <= :now)
    ORDER BY wake_at, id
    LIMIT :limit
)
UPDATE runs
SET owner = :owner,
    epoch = CASE WHEN owner = :owner THEN epoch ELSE epoch + 1 END,
    lease_expires = :expires,
    wake_at = min(
        :expires,
        coalesce(
            (SELECT due_at FROM due WHERE due.run_id = runs.id ORDER BY due_at LIMIT 1),
            :expires
        )
    )
WHERE id IN (SELECT id FROM claimable)
RETURNING id, owner, epoch, lease_expires,
    (SELECT nullif(c.held_by, :owner) FROM claimable AS c WHERE c.id = runs.id) AS taken_from;

-- name: acquire_run
-- One run taken by :owner, unless it has ended or (without :force) another owner holds it
-- alive; with the other owner it was taken from, if any (read before the update, as for
-- claim_runs: the WHERE clause reads the CTE first).
WITH held AS MATERIALIZED (SELECT id, owner AS held_by FROM runs WHERE id = :run_id)
UPDATE runs
SET owner = :owner,
    epoch = CASE WHEN owner = :owner THEN epoch ELSE epoch + 1 END,
    lease_expires = :expires,
    wake_at = min(
        :expires,
        coalesce(
            (SELECT due_at FROM due WHERE due.run_id = runs.id ORDER BY due_at LIMIT 1),
            :expires
        )
    )
WHERE id IN (SELECT id FROM held)
    AND NOT ended
    AND (:force OR owner IS NULL OR owner = :owner OR lease_expires <= :now)
RETURNING id, owner, epoch, lease_expires,
    (SELECT nullif(h.held_by, :owner) FROM held AS h) AS taken_from;

-- name: take_lease
-- A commit that takes its run's lease (Commit.take), checked already in the write transaction
-- (nobody has held the run since epoch :epoch - 1, or :owner holds it at :epoch already): held
-- by :owner at :epoch until :expires. (settle_run, after it, brings the wake instant up to date.)
UPDATE runs SET owner = :owner, epoch = :epoch, lease_expires = :expires WHERE id = :run_id;

-- name: renew_leases
UPDATE runs
SET lease_expires = :expires,
    wake_at = CASE
        WHEN ended THEN NULL
        ELSE min(
            :expires,
            coalesce(
                (SELECT due_at FROM due WHERE due.run_id = runs.id ORDER BY due_at LIMIT 1),
                :expires
            )
        )
    END
WHERE owner = :owner
    AND (:run_ids IS NULL OR id IN (SELECT value FROM json_each(:run_ids)))
RETURNING id, owner, epoch, lease_expires;

-- name: release_runs
UPDATE runs
SET owner = NULL,
    lease_expires = NULL,
    wake_at = CASE
        WHEN ended THEN NULL
        WHEN runnable THEN created_at
        ELSE (SELECT due_at FROM due WHERE due.run_id = runs.id ORDER BY due_at LIMIT 1)
    END
WHERE owner = :owner
RETURNING id;

-- name: lease_of
SELECT id, owner, epoch, lease_expires FROM runs WHERE id = :run_id;

-- -- flows ------------

-- name: put_flow
-- A row back: the flow was new.
INSERT INTO flows (flow_id, digest, version, document, stored_at, stored_order)
VALUES (
    :flow_id, :digest, :version, :document, :stored_at,
    (SELECT coalesce(max(stored_order), 0) + 1 FROM flows)
)
ON CONFLICT (flow_id, digest) DO NOTHING
RETURNING digest;

-- name: get_flow
SELECT version, document FROM flows WHERE flow_id = :flow_id AND digest = :digest;

-- name: latest_flow
-- The document of a flow id stored last.
SELECT version, digest, document FROM flows WHERE flow_id = :flow_id
ORDER BY stored_order DESC LIMIT 1;

-- name: flow_versions
-- Every stored document (of :flow_id unless it is NULL), by id then in the order first stored,
-- with the number of runs started on it and whether it is its id's latest.
SELECT
    flows.flow_id, flows.version, flows.digest, flows.stored_at,
    (
        SELECT count(*) FROM runs
        WHERE runs.flow_id = flows.flow_id
          AND json_extract(runs.options, '$.flow_digest') = flows.digest
    ) AS runs,
    flows.stored_order = (
        SELECT max(later.stored_order) FROM flows AS later WHERE later.flow_id = flows.flow_id
    ) AS latest
FROM flows
WHERE :flow_id IS NULL OR flows.flow_id = :flow_id
ORDER BY flows.flow_id, flows.stored_order;
-- -- finding runs by the start of their id, and pruning ended runs ------------

-- name: run_ids_between
-- Ids from :prefix up to (not including) :end: those that start with :prefix.
SELECT id FROM runs WHERE id >= :prefix AND id < :end ORDER BY id LIMIT :limit;

-- name: run_ids_from
-- Ids from :prefix on (for a prefix that no text follows, see flowtide.store.base.prefix_end).
SELECT id FROM runs WHERE id >= :prefix ORDER BY id LIMIT :limit;

-- name: prunable_runs
-- Runs that ended before :ended_before and are no child of a run that has not ended.
SELECT r.id FROM runs r
WHERE r.ended AND r.id > :after AND coalesce(r.finished_at, r.created_at) < :ended_before
    AND NOT EXISTS (SELECT 1 FROM runs p WHERE p.id = r.parent_run_id AND NOT p.ended)
ORDER BY r.id LIMIT :limit;

-- name: lock_pruned
-- The runs of a batch (:ids, a JSON array), all of them: the write lock, held since BEGIN
-- IMMEDIATE, keeps them prunable (PostgreSQL locks their rows).
SELECT value FROM json_each(:ids) ORDER BY value;

-- name: prune_state
DELETE FROM run_state WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: prune_tokens
DELETE FROM tokens WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: prune_history
DELETE FROM history WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: prune_due
DELETE FROM due WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: prune_anchors
DELETE FROM anchors WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: prune_parks
DELETE FROM parks WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: prune_signal_answers
DELETE FROM signal_answers WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: prune_signal_requests
DELETE FROM signal_requests WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: prune_scatter_items
DELETE FROM scatter_items WHERE run_id IN (SELECT value FROM json_each(:ids));

-- name: prune_runs
-- Last: the other tables' rows refer to their run.
DELETE FROM runs WHERE id IN (SELECT value FROM json_each(:ids));

-- -- workers' heartbeats ------------

-- name: record_worker
INSERT INTO workers (worker_id, host, pid, started_at, last_seen, lease_ttl, runs_held, nodes, waiting)
VALUES (:worker_id, :host, :pid, :started_at, :last_seen, :lease_ttl, :runs_held, :nodes, :waiting)
ON CONFLICT (worker_id) DO UPDATE SET
    host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,
    last_seen = excluded.last_seen, lease_ttl = excluded.lease_ttl,
    runs_held = excluded.runs_held, nodes = excluded.nodes, waiting = excluded.waiting;

-- name: workers
SELECT worker_id, host, pid, started_at, last_seen, lease_ttl, runs_held, nodes, waiting
FROM workers ORDER BY worker_id;

-- name: forget_worker
DELETE FROM workers WHERE worker_id = :worker_id RETURNING worker_id;
