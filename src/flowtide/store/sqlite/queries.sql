-- The SQLite store's statements, by name. Instants are INTEGER microseconds since the Unix epoch;
-- JSON values are text. Every statement that writes runs inside BEGIN IMMEDIATE ... COMMIT.
--
-- A run's wake instant (see flowtide.store.base) is written by every statement that changes
-- what it depends on: an ended run has none; a held run wakes at the earlier of its lease's
-- expiry and its earliest due entry; a runnable run nobody holds, at its creation; any other
-- run nobody holds, at its earliest due entry, if it has one.

-- -- opening ------------

-- name: tables
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
SELECT 1 FROM runs WHERE id = :id;

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

-- name: update_run
-- The run record a commit writes (its lease and wake instant are not part of it).
UPDATE runs
SET flow_id = :flow_id, flow_version = :flow_version, lifecycle = :lifecycle, ended = :ended,
    runnable = :runnable, created_at = :created_at, deadline = :deadline,
    started_at = :started_at, finished_at = :finished_at, parent_run_id = :parent_run_id,
    parent_token_id = :parent_token_id, depth = :depth, outcome = :outcome, result = :result,
    options = :options, checkpoint = :checkpoint
WHERE id = :id;

-- name: run_for_commit
-- What a commit is checked against: the run's lifecycle and lease.
SELECT lifecycle, ended, owner, epoch, deadline_fired FROM runs WHERE id = :id;

-- name: get_run
SELECT
    id, flow_id, flow_version, lifecycle, created_at, deadline, started_at, finished_at,
    parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint
FROM runs WHERE id = :id;

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

-- name: rewake_run
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
WHERE id = :id;

-- -- state ------------

-- name: set_state
-- A top-level key set (a key set again keeps its place).
INSERT INTO run_state (run_id, key, value) VALUES (:run_id, :key, :value)
ON CONFLICT (run_id, key) DO UPDATE SET value = excluded.value;

-- name: delete_state
DELETE FROM run_state WHERE run_id = :run_id AND key = :key;

-- name: get_state
SELECT key, value FROM run_state WHERE run_id = :run_id ORDER BY rowid;

-- -- tokens ------------

-- name: put_token
-- A token inserted or replaced (a token written again keeps its place).
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

-- name: expected_token
-- What a commit's expectation of a token is checked against.
SELECT status, epoch, deadline FROM tokens WHERE run_id = :run_id AND id = :id;

-- name: tokens
SELECT
    run_id, id, placement, status, attempt, visit, lineage, deadline, due, created_at, data, epoch
FROM tokens WHERE run_id = :run_id ORDER BY rowid;

-- name: tokens_by_status
-- :statuses is a JSON array of status values.
SELECT
    run_id, id, placement, status, attempt, visit, lineage, deadline, due, created_at, data, epoch
FROM tokens
WHERE run_id = :run_id AND status IN (SELECT value FROM json_each(:statuses))
ORDER BY rowid;

-- name: token
SELECT
    run_id, id, placement, status, attempt, visit, lineage, deadline, due, created_at, data, epoch
FROM tokens WHERE run_id = :run_id AND id = :id;

-- -- history ------------

-- name: last_seq
SELECT coalesce(max(seq), 0) FROM history WHERE run_id = :run_id;

-- name: append_event
INSERT INTO history (run_id, seq, kind, at, placement, attempt, token_id, data)
VALUES (:run_id, :seq, :kind, :at, :placement, :attempt, :token_id, :data);

-- name: history
SELECT run_id, seq, kind, at, placement, attempt, token_id, data
FROM history WHERE run_id = :run_id AND seq > :after ORDER BY seq;

-- -- due entries ------------

-- name: clear_due
DELETE FROM due WHERE run_id = :run_id AND token_id = :token_id;

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

-- name: clear_run_due
DELETE FROM due WHERE run_id = :run_id;

-- name: due_of
SELECT token_id, purpose, due_at FROM due WHERE run_id = :run_id ORDER BY due_at, set_order;

-- -- node anchors ------------

-- name: put_anchor
INSERT OR REPLACE INTO anchors (run_id, placement, item, at)
VALUES (:run_id, :placement, :item, :at);

-- name: release_anchor
DELETE FROM anchors WHERE run_id = :run_id AND placement = :placement AND item = :item;

-- name: node_anchor
SELECT at FROM anchors WHERE run_id = :run_id AND placement = :placement AND item = :item;

-- name: node_anchors
SELECT run_id, placement, item, at FROM anchors WHERE run_id = :run_id;

-- -- scatter items ------------

-- name: put_scatter_item
INSERT OR REPLACE INTO scatter_items (
    run_id, progress, idx, status, output, result, key, completion
) VALUES (:run_id, :progress, :idx, :status, :output, :result, :key, :completion);

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

-- name: answered
SELECT 1 FROM signal_answers WHERE key = :key;

-- name: put_answer
INSERT INTO signal_answers (key, run_id, answer) VALUES (:key, :run_id, :answer);

-- name: signal_answer
SELECT key, run_id, answer FROM signal_answers WHERE key = :key;

-- -- signal requests ------------

-- name: insert_request
INSERT INTO signal_requests (id, run_id, requested_at, request, answer, answered_at)
VALUES (:id, :run_id, :requested_at, :request, NULL, NULL);

-- name: request_exists
SELECT 1 FROM signal_requests WHERE id = :id;

-- name: unanswered_request
-- What a commit answering a request is checked against: the request is its run's, unanswered.
SELECT 1 FROM signal_requests WHERE id = :id AND run_id = :run_id AND answer IS NULL;

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

-- name: request_before
-- What a commit firing a deadline is checked against: an unanswered request of the run
-- recorded before the deadline.
SELECT id FROM signal_requests
WHERE run_id = :run_id AND answer IS NULL AND requested_at < :at
ORDER BY requested_at LIMIT 1;

-- name: deadline_fired
UPDATE runs SET deadline_fired = max(coalesce(deadline_fired, :at), :at) WHERE id = :run_id;

-- -- leases and wake instants ------------

-- name: next_wake
SELECT wake_at FROM runs WHERE wake_at IS NOT NULL ORDER BY wake_at LIMIT 1;

-- name: claim_runs
-- Up to :limit runs whose wake has come and that no other owner holds alive, earliest wake
-- first, taken by :owner until :expires (the next epoch unless :owner held it already).
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
WHERE id IN (
    SELECT id FROM runs
    WHERE wake_at <= :now AND (owner IS NULL OR owner = :owner OR lease_expires <= :now)
    ORDER BY wake_at, id
    LIMIT :limit
)
RETURNING id, owner, epoch, lease_expires;

-- name: take_run
-- One run taken by :owner, unless it has ended or (without :force) another owner holds it alive.
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
WHERE id = :id
    AND NOT ended
    AND (:force OR owner IS NULL OR owner = :owner OR lease_expires <= :now)
RETURNING id, owner, epoch, lease_expires;

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
SELECT owner, epoch, lease_expires FROM runs WHERE id = :id;

-- -- flows ------------

-- name: put_flow
INSERT INTO flows (flow_id, digest, version, document) VALUES (:flow_id, :digest, :version, :document)
ON CONFLICT (flow_id, digest) DO NOTHING;

-- name: get_flow
SELECT flow_id, version, digest, document FROM flows WHERE flow_id = :flow_id AND digest = :digest;
