-- The PostgreSQL store's statements, by name. Parameters are bound (%(name)s); {schema} and
-- {channel} are identifiers, quoted by the store (psycopg.sql.Identifier).

-- ---------------------------------------------------------------------------------------------
-- Connections and the schema

-- name: set_search_path
-- Every statement below names its tables without a schema: the store's schema is the path.
SET search_path TO {schema};

-- name: set_time_zone
-- Instants come back as UTC.
SET TIME ZONE 'UTC';

-- name: set_plan_cache_mode
-- A statement prepared on a connection is planned once, for any parameters: they are JSON
-- documents and run ids, which a plan made for their values would not use (PostgreSQL would
-- otherwise plan the first five runs of each for their parameters, and go on so for a
-- statement whose plan for any parameters looks dearer, as the run snapshot's read does). A
-- statement limited by a parameter is written so that its plan, expecting a tenth of the rows
-- kept, still finds runs by their keys (claim_runs, prunable_runs).
SET plan_cache_mode = force_generic_plan;

-- name: set_channel
-- The store's notification channel, as a setting of every connection (the statements that
-- notify read it: settle_run, release_runs).
SELECT set_config('flowtide.channel', %(channel)s, false);

-- name: clock_now
-- The database's clock, read at once (not the transaction's start): workers keep time by it.
SELECT clock_timestamp();

-- name: lock_schema
-- Held until the migrating transaction ends: openers of one schema migrate one at a time.
SELECT pg_advisory_xact_lock(%(key)s);

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema};

-- name: schema_tables
SELECT tablename FROM pg_catalog.pg_tables WHERE schemaname = %(schema)s;

-- name: schema_version
SELECT version, min_reader_version FROM flowtide_schema ORDER BY version DESC LIMIT 1;

-- name: record_migration
INSERT INTO flowtide_schema (version, name, min_reader_version, applied_at)
VALUES (%(version)s, %(name)s, %(min_reader_version)s, now());

-- name: listen
LISTEN {channel};

-- ---------------------------------------------------------------------------------------------
-- Transactions (the store's connections are in autocommit mode: a transaction is explicit)

-- name: begin
BEGIN;

-- name: commit
COMMIT;

-- ---------------------------------------------------------------------------------------------
-- Commits: what is checked before writing

-- name: advance_run
-- The first statement of every commit: the run's row locked until the transaction ends (it
-- serialises the writers of one run), its history counter advanced by the commit's %(events)s
-- (rolled back with the commit if it is refused), and what the commit is checked against.
UPDATE runs SET last_seq = last_seq + %(events)s WHERE id = %(run_id)s
RETURNING lifecycle, owner, epoch, last_seq - %(events)s;

-- name: commit_whole
-- A commit sent whole, before its run was read: one statement that checks it and writes it (a
-- transaction of its own when sent alone). %(commit)s is the commit as one JSON object (see
-- flowtide.store.postgres.commits.whole): its run, lease, the lifecycles it allows, and one
-- array of rows for each table it writes. The statement is made of this one and the parts
-- named whole_* the commit needs, each put in its place (/*name*/, in place of what follows
-- there, if anything), so that a commit pays for no table it does not write (a plan with every
-- part costs a step twice its own).
--
-- Every read of the statement sees one snapshot, taken before the run's row is locked; so the
-- row is updated only if it is the very version the snapshot shows (ctid). Every transaction
-- that writes a run's rows updates its row too, so a commit of the run that committed meanwhile
-- makes the update find no row: then flowtide_commit_guard fails the statement, nothing is
-- applied, and the store takes the commit the careful way (its run read first, then checked).
-- The guard fails it as well unless the run exists, is held under the commit's lease (or the
-- lease it takes can be taken) and is in one of the lifecycles allowed; its parts check the
-- rest (whole_expect, whole_answers_check, whole_requests_check, whole_deadline_check).
--
-- The writes are those of commit_writes (delete_all_due to settle_run), each reading the
-- advanced run (so that they run after its row is locked, the order every commit locks in) and
-- none touching a row another touches: the due entries dropped are read first
-- (whole_due_read) and the run's wake instant computed from what is left of them and those
-- set. Gives the seq the commit's events follow.
WITH p AS (
    SELECT
        j, j ->> 'run_id' AS run_id, (j ->> 'event_count')::bigint AS events,
        j ->> 'owner' AS owner, (j ->> 'epoch')::bigint AS epoch,
        (j ->> 'taking')::boolean AS taking, (j ->> 'release')::boolean AS release,
        (j ->> 'settle')::boolean AS settle, (j ->> 'fires_deadline')::timestamptz AS fired
    FROM (SELECT %(commit)s::jsonb AS j) AS given
), seen AS (
    SELECT
        r.ctid AS version, r.id, r.lifecycle, r.created_at, r.owner, r.epoch, r.lease_expires,
        r.wake_at
    FROM runs r, p WHERE r.id = p.run_id
)/*due_read*/, next AS (
    SELECT
        s.id, s.version, s.wake_at AS old_wake, p.events, p.release, p.settle, p.fired,
        CASE WHEN p.taking THEN p.owner ELSE s.owner END AS held_by,
        CASE WHEN p.taking THEN p.epoch ELSE s.epoch END AS epoch,
        CASE WHEN p.taking THEN
            coalesce((p.j ->> 'now')::timestamptz, clock_timestamp())
                + (p.j ->> 'term')::float8 * interval '1 second'
        ELSE s.lease_expires END AS held_until,
        /*first_due*/NULL::timestamptz AS first_due,
        (
            p.owner IS NULL
            OR (NOT p.taking AND s.owner = p.owner AND s.epoch = p.epoch)
            OR (
                p.taking
                AND (
                    (s.owner IS NULL AND s.epoch = p.epoch - 1)
                    OR (s.owner = p.owner AND s.epoch = p.epoch)
                )
            )
        )
        AND (p.j -> 'lifecycles' IS NULL OR (p.j -> 'lifecycles') ? s.lifecycle) AS allowed,
        w.*
    FROM p JOIN seen s ON TRUE
    /*run_read*/JOIN LATERAL (SELECT s.lifecycle, s.created_at) AS w ON TRUE
), advanced AS (
    UPDATE runs SET
        last_seq = runs.last_seq + n.events,
        owner = CASE WHEN n.release THEN NULL ELSE n.held_by END,
        epoch = n.epoch,
        lease_expires = CASE WHEN n.release THEN NULL ELSE n.held_until END,
        deadline_fired = GREATEST(runs.deadline_fired, n.fired),
        wake_at = CASE
            WHEN NOT n.settle THEN runs.wake_at
            WHEN n.lifecycle = ANY(%(ended)s::text[]) THEN NULL
            WHEN n.held_by IS NOT NULL AND NOT n.release THEN LEAST(n.held_until, n.first_due)
            WHEN n.lifecycle = ANY(%(runnable)s::text[]) THEN n.created_at
            ELSE n.first_due
        END/*run_write*/
    FROM next n
    WHERE runs.id = n.id AND runs.ctid = n.version AND n.allowed
    RETURNING runs.id, runs.last_seq - n.events AS last_seq, runs.owner, runs.wake_at,
        n.held_by, n.old_wake, n.settle, runs.lifecycle = ANY(%(ended)s::text[]) AS ended
)/*writes*/
SELECT a.last_seq, flowtide_commit_guard(a.id IS NOT NULL/*checks*/)/*notice*/
FROM p LEFT JOIN advanced a ON TRUE;

-- name: whole_run_read
-- (commit_whole's part for a commit that writes its run's record: the record, in place of the
-- lifecycle and creation instant the run has.)
JOIN LATERAL jsonb_to_record(p.j -> 'run') AS w(
    lifecycle text, created_at timestamptz, flow_id text, flow_version text,
    deadline timestamptz, started_at timestamptz, finished_at timestamptz, parent_run_id text,
    parent_token_id text, depth integer, outcome text, result text, options text,
    checkpoint text
) ON TRUE

-- name: whole_run_write
-- (commit_whole's part for a commit that writes its run's record: its columns.)
,
        lifecycle = n.lifecycle, created_at = n.created_at, flow_id = n.flow_id,
        flow_version = n.flow_version, deadline = n.deadline, started_at = n.started_at,
        finished_at = n.finished_at, parent_run_id = n.parent_run_id,
        parent_token_id = n.parent_token_id, depth = n.depth, outcome = n.outcome,
        result = n.result::json, options = n.options::json, checkpoint = n.checkpoint::json

-- name: create_whole
-- A new run and its first commit, when nothing but a run id taken already may refuse them (see
-- Creation.may_be_refused): one statement, a transaction of its own, made as commit_whole is
-- (its parts, whole_*, in their places), %(commit)s the first commit as one JSON object with
-- the run's row ("run": insert_run's columns, "lease_term" in seconds) and its initial state
-- among the commit's. The run is inserted (a taken id fails it on the primary key) with its
-- wake instant as settle_run would set it. Gives the seq the commit's events follow (0).
WITH p AS (
    SELECT j, j ->> 'run_id' AS run_id FROM (SELECT %(commit)s::jsonb AS j) AS given
)/*due_read*/, advanced AS (
    INSERT INTO runs (
        id, flow_id, flow_version, lifecycle, created_at, deadline, started_at, finished_at,
        parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint,
        owner, epoch, lease_expires, last_seq, wake_at
    )
    SELECT
        w.id, w.flow_id, w.flow_version, w.lifecycle, w.created_at, w.deadline, w.started_at,
        w.finished_at, w.parent_run_id, w.parent_token_id, w.depth, w.outcome,
        w.result::json, w.options::json, w.checkpoint::json, w.owner, w.epoch, h.held_until,
        w.last_seq,
        CASE
            WHEN w.lifecycle = ANY(%(ended)s::text[]) THEN NULL
            WHEN w.owner IS NOT NULL THEN LEAST(h.held_until, /*first_due*/NULL::timestamptz)
            WHEN w.lifecycle = ANY(%(runnable)s::text[]) THEN w.created_at
            ELSE /*first_due*/NULL::timestamptz
        END
    FROM p, jsonb_to_record(p.j -> 'run') AS w(
        id text, flow_id text, flow_version text, lifecycle text, created_at timestamptz,
        deadline timestamptz, started_at timestamptz, finished_at timestamptz,
        parent_run_id text, parent_token_id text, depth integer, outcome text, result text,
        options text, checkpoint text, owner text, epoch bigint, lease_expires timestamptz,
        lease_term float8, last_seq bigint
    ), LATERAL (
        SELECT coalesce(
            clock_timestamp() + w.lease_term * interval '1 second', w.lease_expires
        ) AS held_until
    ) AS h
    RETURNING id, 0::bigint AS last_seq, owner, wake_at, NULL::text AS held_by,
        NULL::timestamptz AS old_wake, lifecycle = ANY(%(ended)s::text[]) AS ended
)/*writes*/
SELECT a.last_seq/*notice*/
FROM p LEFT JOIN advanced a ON TRUE;

-- name: whole_first_due_set
-- (create_whole's part for a run created with due entries: the earliest of them.)
(SELECT min(due_at) FROM due_set)

-- name: whole_due_read
-- (commit_whole's part for a commit that changes its run's due entries: those it sets, and those
-- it drops, clears or fires that it does not set again.)
, due_set AS (
    SELECT s.token_id, s.purpose, s.due_at
    FROM p, jsonb_to_recordset(p.j -> 'due') AS s(token_id text, purpose text, due_at timestamptz)
), due_gone AS (
    SELECT d.token_id, d.purpose
    FROM due d, p
    WHERE d.run_id = p.run_id
        AND (
            COALESCE((p.j -> 'due_cleared') ? d.token_id, FALSE)
            OR EXISTS (
                SELECT 1
                FROM jsonb_to_recordset(p.j -> 'due_dropped') AS x(token_id text, purpose text)
                WHERE x.token_id = d.token_id AND x.purpose = d.purpose
            )
            OR EXISTS (
                SELECT 1
                FROM jsonb_to_recordset(p.j -> 'due_fired')
                    AS x(token_id text, purpose text, due_at timestamptz)
                WHERE x.token_id = d.token_id AND x.purpose = d.purpose AND x.due_at = d.due_at
            )
        )
        AND NOT EXISTS (
            SELECT 1 FROM due_set s WHERE s.token_id = d.token_id AND s.purpose = d.purpose
        )
)

-- name: whole_first_due
-- (commit_whole's part for a commit that settles its run without changing its due entries: the
-- earliest of them.)
(SELECT min(d.due_at) FROM due d WHERE d.run_id = s.id)

-- name: whole_first_due_changed
-- (commit_whole's part for a commit that settles its run and changes its due entries: the
-- earliest of those left and those set.)
(
    SELECT min(kept.due_at) FROM (
        SELECT d.due_at FROM due d
        WHERE d.run_id = s.id
            AND NOT EXISTS (
                SELECT 1 FROM due_gone g WHERE g.token_id = d.token_id AND g.purpose = d.purpose
            )
            AND NOT EXISTS (
                SELECT 1 FROM due_set x WHERE x.token_id = d.token_id AND x.purpose = d.purpose
            )
        UNION ALL SELECT due_at FROM due_set
    ) AS kept
)

-- name: whole_state_deleted
, state_deleted AS (
    DELETE FROM state s USING advanced a, p
    WHERE s.run_id = a.id AND COALESCE((p.j -> 'state_deleted') ? s.key, FALSE)
)

-- name: whole_state
-- (A key the commit deletes too is deleted, as delete_state after put_state leaves it.)
, state_put AS (
    INSERT INTO state (run_id, key, value)
    SELECT a.id, x.key, x.value::json
    FROM advanced a, p, ROWS FROM (jsonb_to_recordset(p.j -> 'state') AS (key text, value text))
        WITH ORDINALITY AS x(key, value, i)
    WHERE NOT COALESCE((p.j -> 'state_deleted') ? x.key, FALSE)
    ORDER BY x.i
    ON CONFLICT (run_id, key) DO UPDATE SET value = EXCLUDED.value
)

-- name: whole_tokens
, tokens_put AS (
    INSERT INTO tokens (
        run_id, id, placement, status, attempt, visit, lineage, deadline, due, created_at, data,
        epoch
    )
    SELECT
        a.id, t.id, t.placement, t.status, t.attempt, t.visit, t.lineage::json, t.deadline,
        t.due, t.created_at, t.data::json, t.epoch
    FROM advanced a, p, ROWS FROM (
        jsonb_to_recordset(p.j -> 'tokens') AS (
            id text, placement text, status text, attempt integer, visit integer, lineage text,
            deadline timestamptz, due timestamptz, created_at timestamptz, data text,
            epoch bigint
        )
    ) WITH ORDINALITY AS t(
        id, placement, status, attempt, visit, lineage, deadline, due, created_at, data, epoch, i
    )
    ORDER BY t.i
    ON CONFLICT (run_id, id) DO UPDATE SET
        placement = EXCLUDED.placement, status = EXCLUDED.status, attempt = EXCLUDED.attempt,
        visit = EXCLUDED.visit, lineage = EXCLUDED.lineage, deadline = EXCLUDED.deadline,
        due = EXCLUDED.due, created_at = EXCLUDED.created_at, data = EXCLUDED.data,
        epoch = EXCLUDED.epoch
)

-- name: whole_events
-- (Numbered from the run's history counter, as advanced.)
, events_put AS (
    INSERT INTO events (run_id, seq, kind, at, placement, attempt, token_id, data)
    SELECT a.id, a.last_seq + e.i, e.kind, e.at, e.placement, e.attempt, e.token_id, e.data::json
    FROM advanced a, p, ROWS FROM (
        jsonb_to_recordset(p.j -> 'events') AS (
            kind text, at timestamptz, placement text, attempt integer, token_id text, data text
        )
    ) WITH ORDINALITY AS e(kind, at, placement, attempt, token_id, data, i)
)

-- name: whole_due
-- (An ended run keeps no due entry.)
, due_deleted AS (
    DELETE FROM due d USING advanced a
    WHERE d.run_id = a.id
        AND (
            a.ended
            OR EXISTS (
                SELECT 1 FROM due_gone g WHERE g.token_id = d.token_id AND g.purpose = d.purpose
            )
        )
), due_put AS (
    INSERT INTO due (run_id, token_id, purpose, due_at)
    SELECT a.id, s.token_id, s.purpose, s.due_at FROM advanced a, due_set s WHERE NOT a.ended
    ON CONFLICT (run_id, token_id, purpose) DO UPDATE SET
        due_at = EXCLUDED.due_at, set_order = EXCLUDED.set_order
)

-- name: whole_due_ended
-- (A commit that changes no due entry of its run, but may end it: an ended run keeps none.)
, due_deleted AS (
    DELETE FROM due d USING advanced a WHERE d.run_id = a.id AND a.ended
)

-- name: whole_anchors_released
, anchors_released AS (
    DELETE FROM node_anchors n
    USING advanced a, p,
        jsonb_to_recordset(p.j -> 'anchors_released') AS x(placement text, item text)
    WHERE n.run_id = a.id AND n.placement = x.placement
        AND n.item_key = COALESCE('=' || x.item, '')
)

-- name: whole_anchors
-- (An anchor the commit releases too is released, as release_anchor after put_anchor leaves it.)
, anchors_put AS (
    INSERT INTO node_anchors (run_id, placement, item, at)
    SELECT a.id, x.placement, x.item, x.at
    FROM advanced a, p, ROWS FROM (
        jsonb_to_recordset(p.j -> 'anchors') AS (placement text, item text, at timestamptz)
    ) WITH ORDINALITY AS x(placement, item, at, i)
    WHERE NOT EXISTS (
        SELECT 1
        FROM jsonb_to_recordset(p.j -> 'anchors_released') AS r(placement text, item text)
        WHERE r.placement = x.placement AND r.item IS NOT DISTINCT FROM x.item
    )
    ORDER BY x.i
    ON CONFLICT (run_id, placement, item_key) DO UPDATE SET at = EXCLUDED.at
)

-- name: whole_scatter
, scatter_put AS (
    INSERT INTO scatter_items (
        run_id, progress, item_index, status, output, result, key, item_order
    )
    SELECT a.id, x.progress, x.index, x.status, x.output, x.result::json, x.key::json, x.order
    FROM advanced a, p, jsonb_to_recordset(p.j -> 'scatter') AS x(
        progress text, index integer, status text, output text, result text, key text,
        "order" integer
    )
    ON CONFLICT (run_id, progress, item_index) DO UPDATE SET
        status = EXCLUDED.status, output = EXCLUDED.output, result = EXCLUDED.result,
        key = EXCLUDED.key, item_order = EXCLUDED.item_order
)

-- name: whole_parks
, parks_put AS (
    INSERT INTO parks (
        id, run_id, token_id, placement, visit, epoch, parked_at, deadline, key, payload,
        status, closed_at, closed_by
    )
    SELECT
        x.id, x.run_id, x.token_id, x.placement, x.visit, x.epoch, x.parked_at, x.deadline,
        x.key, x.payload::json, x.status, x.closed_at, x.closed_by
    FROM advanced a, p, ROWS FROM (
        jsonb_to_recordset(p.j -> 'parks') AS (
            id text, run_id text, token_id text, placement text, visit integer, epoch bigint,
            parked_at timestamptz, deadline timestamptz, key text, payload text, status text,
            closed_at timestamptz, closed_by text
        )
    ) WITH ORDINALITY AS x(
        id, run_id, token_id, placement, visit, epoch, parked_at, deadline, key, payload, status,
        closed_at, closed_by, i
    )
    ORDER BY x.i
    ON CONFLICT (id) DO UPDATE SET
        run_id = EXCLUDED.run_id, token_id = EXCLUDED.token_id, placement = EXCLUDED.placement,
        visit = EXCLUDED.visit, epoch = EXCLUDED.epoch, parked_at = EXCLUDED.parked_at,
        deadline = EXCLUDED.deadline, key = EXCLUDED.key, payload = EXCLUDED.payload,
        status = EXCLUDED.status, closed_at = EXCLUDED.closed_at, closed_by = EXCLUDED.closed_by
)

-- name: whole_answers
-- (In key order, as every commit takes them: see insert_answer.)
, answers_put AS (
    INSERT INTO signal_answers (key, run_id, answer)
    SELECT x.key, x.run_id, x.answer::json
    FROM advanced a, p,
        jsonb_to_recordset(p.j -> 'answers') AS x(key text, run_id text, answer text)
    ORDER BY x.key
)

-- name: whole_requests
, requests_answered AS (
    UPDATE signal_requests q SET answer = x.answer::json, answered_at = x.answered_at
    FROM advanced a, p,
        jsonb_to_recordset(p.j -> 'requests') AS x(id text, answer text, answered_at timestamptz)
    WHERE q.id = x.id AND q.answer IS NULL
)

-- name: whole_expect
-- (commit_whole's check of its token expectations: each token is in one of its statuses, at
-- its epoch if given, and with no deadline or one after alive_at if given, as Expect.mismatch.)
AND (
    SELECT count(*)
    FROM jsonb_to_recordset(p.j -> 'expect')
        AS e(id text, statuses jsonb, epoch bigint, alive_at timestamptz)
    JOIN tokens t ON t.run_id = a.id AND t.id = e.id
    WHERE e.statuses ? t.status
        AND (e.epoch IS NULL OR t.epoch = e.epoch)
        AND (e.alive_at IS NULL OR t.deadline IS NULL OR t.deadline > e.alive_at)
) = jsonb_array_length(p.j -> 'expect')

-- name: whole_answers_check
-- (No signal key the commit answers is answered already.)
AND NOT EXISTS (
    SELECT 1 FROM signal_answers s, jsonb_to_recordset(p.j -> 'answers') AS x(key text)
    WHERE s.key = x.key
)

-- name: whole_requests_check
-- (Each request the commit answers is its run's, and unanswered.)
AND (
    SELECT count(*)
    FROM signal_requests q, jsonb_to_recordset(p.j -> 'requests') AS x(id text)
    WHERE q.id = x.id AND q.run_id = a.id AND q.answer IS NULL
) = jsonb_array_length(p.j -> 'requests')

-- name: whole_deadline_check
-- (The deadline the commit fires has come, on the database's clock if "on_clock", and no
-- unanswered request of the run was recorded before it: as deadline_check.)
AND (
    NOT (p.j ->> 'on_clock')::boolean
    OR clock_timestamp() >= (p.j ->> 'fires_deadline')::timestamptz
)
AND NOT EXISTS (
    SELECT 1 FROM signal_requests q
    WHERE q.run_id = a.id AND q.answer IS NULL
        AND q.requested_at < (p.j ->> 'fires_deadline')::timestamptz
)

-- name: whole_notice
-- (commit_whole's part for a commit that settles its run: settle_run's notice, which see, from
-- the run as the statement leaves it.)
, (
    SELECT pg_notify(
        current_setting('flowtide.channel'),
        CASE WHEN sooner.needed OR NOT (p.j ->> 'by_holder')::boolean THEN 'wake:' ELSE 'told:' END
            || left(a.id, 200)
    )::text
    FROM (
        SELECT COALESCE(
            a.wake_at IS NOT NULL
            AND (a.owner IS NULL OR NOT (p.j ->> 'by_holder')::boolean)
            AND (
                a.old_wake IS NULL
                OR a.wake_at < a.old_wake
                OR (a.owner IS NULL AND a.held_by IS NOT NULL)
            ),
            FALSE
        ) AS needed
    ) AS sooner
    WHERE (p.j ->> 'tell')::boolean OR sooner.needed
)

-- name: run_exists
SELECT EXISTS (SELECT 1 FROM runs WHERE id = %(run_id)s);

-- name: expected_tokens
SELECT id, status, epoch, deadline FROM tokens WHERE run_id = %(run_id)s AND id = ANY(%(ids)s::text[]);

-- name: answered_keys
SELECT key FROM signal_answers WHERE key = ANY(%(keys)s::text[]);

-- name: deadline_check
-- What a commit firing a deadline is checked against (after the run's lock): the database's
-- clock, and an unanswered request of the run recorded before the deadline.
SELECT clock_timestamp(), (
    SELECT id FROM signal_requests
    WHERE run_id = %(run_id)s AND answer IS NULL AND requested_at < %(at)s
    ORDER BY requested_at LIMIT 1
);

-- name: unanswered_requests
-- The requests a commit answers, each with why it may not be (NULL: it is the run's and still
-- unanswered); one not found is unknown.
SELECT id, CASE WHEN run_id <> %(run_id)s THEN 'unknown' WHEN answer IS NOT NULL THEN 'answered' END
FROM signal_requests WHERE id = ANY(%(ids)s::text[]);

-- ---------------------------------------------------------------------------------------------
-- Commits: what is written

-- name: insert_run
-- A run created held: its lease runs for the term asked from the database's clock, or to the
-- instant given if no term is.
INSERT INTO runs (
    id, flow_id, flow_version, lifecycle, created_at, deadline, started_at, finished_at,
    parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint,
    owner, epoch, lease_expires, last_seq
) VALUES (
    %(id)s, %(flow_id)s, %(flow_version)s, %(lifecycle)s, %(created_at)s, %(deadline)s,
    %(started_at)s, %(finished_at)s, %(parent_run_id)s, %(parent_token_id)s, %(depth)s,
    %(outcome)s, %(result)s, %(options)s, %(checkpoint)s, %(owner)s, %(epoch)s,
    coalesce(clock_timestamp() + %(lease_term)s::interval, %(lease_expires)s), %(last_seq)s
);

-- name: write_run
UPDATE runs SET
    flow_id = %(flow_id)s, flow_version = %(flow_version)s, lifecycle = %(lifecycle)s,
    created_at = %(created_at)s, deadline = %(deadline)s, started_at = %(started_at)s,
    finished_at = %(finished_at)s, parent_run_id = %(parent_run_id)s,
    parent_token_id = %(parent_token_id)s, depth = %(depth)s, outcome = %(outcome)s,
    result = %(result)s, options = %(options)s, checkpoint = %(checkpoint)s
WHERE id = %(id)s;

-- name: put_token
-- A token rewritten keeps its place (ord) among the run's tokens.
INSERT INTO tokens (
    run_id, id, placement, status, attempt, visit, lineage, deadline, due, created_at, data, epoch
) VALUES (
    %(run_id)s, %(id)s, %(placement)s, %(status)s, %(attempt)s, %(visit)s, %(lineage)s,
    %(deadline)s, %(due)s, %(created_at)s, %(data)s, %(epoch)s
)
ON CONFLICT (run_id, id) DO UPDATE SET
    placement = EXCLUDED.placement, status = EXCLUDED.status, attempt = EXCLUDED.attempt,
    visit = EXCLUDED.visit, lineage = EXCLUDED.lineage, deadline = EXCLUDED.deadline,
    due = EXCLUDED.due, created_at = EXCLUDED.created_at, data = EXCLUDED.data,
    epoch = EXCLUDED.epoch;

-- name: put_state
INSERT INTO state (run_id, key, value) VALUES (%(run_id)s, %(key)s, %(value)s)
ON CONFLICT (run_id, key) DO UPDATE SET value = EXCLUDED.value;

-- name: delete_state
DELETE FROM state WHERE run_id = %(run_id)s AND key = ANY(%(keys)s::text[]);

-- name: insert_event
-- Numbered from the run's history counter (advanced already by the commit): %(back)s is how
-- many of the commit's events come after this one. Many events are inserted by one statement
-- (flowtide.store.multirow).
INSERT INTO events (run_id, seq, kind, at, placement, attempt, token_id, data)
VALUES (
    %(run_id)s, (SELECT r.last_seq FROM runs r WHERE r.id = %(run_id)s) - %(back)s, %(kind)s,
    %(at)s, %(placement)s, %(attempt)s, %(token_id)s, %(data)s
);

-- name: clear_due
DELETE FROM due WHERE run_id = %(run_id)s AND token_id = ANY(%(token_ids)s::text[]);

-- name: drop_due
DELETE FROM due WHERE run_id = %(run_id)s AND token_id = %(token_id)s AND purpose = %(purpose)s;

-- name: fire_due
-- Only as it was fired: an entry set again since, for another instant, is kept.
DELETE FROM due
WHERE run_id = %(run_id)s AND token_id = %(token_id)s AND purpose = %(purpose)s
    AND due_at = %(due_at)s;

-- name: delete_all_due
DELETE FROM due WHERE run_id = %(run_id)s;

-- name: delete_due_if_ended
-- After a commit that set due entries without knowing its run's lifecycle: an ended run keeps
-- none.
DELETE FROM due
WHERE run_id = %(run_id)s
    AND EXISTS (SELECT 1 FROM runs WHERE id = %(run_id)s AND lifecycle = ANY(%(ended)s::text[]));

-- name: set_due
-- An entry set again replaces the old one and takes a new place among entries of one instant.
INSERT INTO due (run_id, token_id, purpose, due_at)
VALUES (%(run_id)s, %(token_id)s, %(purpose)s, %(due_at)s)
ON CONFLICT (run_id, token_id, purpose) DO UPDATE SET
    due_at = EXCLUDED.due_at, set_order = EXCLUDED.set_order;

-- name: wake_due
-- A due entry set on another run than the commit's (a child's end wakes its parent), unless that
-- run has ended.
INSERT INTO due (run_id, token_id, purpose, due_at)
SELECT %(run_id)s, %(token_id)s, %(purpose)s, %(due_at)s
WHERE EXISTS (
    SELECT 1 FROM runs WHERE id = %(run_id)s AND NOT lifecycle = ANY(%(ended)s::text[]))
ON CONFLICT (run_id, token_id, purpose) DO UPDATE SET
    due_at = EXCLUDED.due_at, set_order = EXCLUDED.set_order;

-- name: put_anchor
INSERT INTO node_anchors (run_id, placement, item, at)
VALUES (%(run_id)s, %(placement)s, %(item)s, %(at)s)
ON CONFLICT (run_id, placement, item_key) DO UPDATE SET at = EXCLUDED.at;

-- name: release_anchor
DELETE FROM node_anchors
WHERE run_id = %(run_id)s AND placement = %(placement)s
    AND item_key = COALESCE('=' || %(item)s::text, '');

-- name: put_scatter_item
INSERT INTO scatter_items (
    run_id, progress, item_index, status, output, result, key, item_order
) VALUES (
    %(run_id)s, %(progress)s, %(index)s, %(status)s, %(output)s, %(result)s, %(key)s,
    %(order)s
)
ON CONFLICT (run_id, progress, item_index) DO UPDATE SET
    status = EXCLUDED.status, output = EXCLUDED.output, result = EXCLUDED.result,
    key = EXCLUDED.key, item_order = EXCLUDED.item_order;

-- name: put_park
-- A park rewritten (closed) keeps its place (ord).
INSERT INTO parks (
    id, run_id, token_id, placement, visit, epoch, parked_at, deadline, key, payload, status,
    closed_at, closed_by
) VALUES (
    %(id)s, %(run_id)s, %(token_id)s, %(placement)s, %(visit)s, %(epoch)s, %(parked_at)s,
    %(deadline)s, %(key)s, %(payload)s, %(status)s, %(closed_at)s, %(closed_by)s
)
ON CONFLICT (id) DO UPDATE SET
    run_id = EXCLUDED.run_id, token_id = EXCLUDED.token_id, placement = EXCLUDED.placement,
    visit = EXCLUDED.visit, epoch = EXCLUDED.epoch, parked_at = EXCLUDED.parked_at,
    deadline = EXCLUDED.deadline, key = EXCLUDED.key, payload = EXCLUDED.payload,
    status = EXCLUDED.status, closed_at = EXCLUDED.closed_at, closed_by = EXCLUDED.closed_by;

-- name: insert_answer
-- A key answered already (by a commit racing this one) fails on the primary key.
INSERT INTO signal_answers (key, run_id, answer) VALUES (%(key)s, %(run_id)s, %(answer)s);

-- name: answer_request
UPDATE signal_requests SET answer = %(answer)s, answered_at = %(answered_at)s
WHERE id = %(id)s AND answer IS NULL;

-- name: run_for_request
-- What a signal request is checked against: the run's lifecycle, its row locked until the
-- transaction ends (requests and commits of a run are ordered).
SELECT lifecycle FROM runs WHERE id = %(run_id)s FOR UPDATE;

-- name: insert_request
-- A request of a run that has not ended, recorded at the database's clock (under the run's
-- lock), unless an instant is given (a store used on a virtual clock), but no earlier than
-- the latest deadline of the run fired. One whose id is taken already (or whose run has ended,
-- or is unknown) inserts nothing (and is refused).
INSERT INTO signal_requests (id, run_id, requested_at, request)
SELECT %(id)s, %(run_id)s,
    GREATEST(coalesce(%(requested_at)s::timestamptz, clock_timestamp()), runs.deadline_fired),
    %(request)s
FROM runs WHERE id = %(run_id)s AND NOT lifecycle = ANY(%(ended)s::text[])
ON CONFLICT (id) DO NOTHING
RETURNING requested_at;

-- name: note_deadline_fired
-- The latest deadline of the run fired: a signal request is recorded no earlier (see
-- insert_request).
UPDATE runs SET deadline_fired = GREATEST(deadline_fired, %(at)s) WHERE id = %(run_id)s;

-- name: settle_run
-- The last statement of a commit that changed what its run's wake depends on: the release of
-- the lease, and the wake instant from what the run now holds (ended: none; held: the earlier
-- of the lease's expiry and the earliest due entry; pending or running: its creation; else its
-- earliest due entry). Notifies the listeners (the store's channel) when the run needs a worker
-- sooner than it did (for a run nobody holds, or one held by a worker other than the
-- committer), and whenever %(tell)s (a signal answered, a signal request stored, the run
-- ended: someone elsewhere may wait for it). A notice for the second reason only, from the
-- run's holder (%(by_holder)s: a signal it answered, the run's end), says so (its payload
-- begins with "told:", any other with "wake:", whatever the run's id): sweepers need not
-- look at the wake instants again for it. SET
-- expressions, and "old", read the row as it was before this statement.
WITH settled AS (
    UPDATE runs SET
        owner = CASE WHEN %(release)s THEN NULL ELSE runs.owner END,
        lease_expires = CASE WHEN %(release)s THEN NULL ELSE runs.lease_expires END,
        wake_at = CASE
            WHEN runs.lifecycle = ANY(%(ended)s::text[]) THEN NULL
            WHEN runs.owner IS NOT NULL AND NOT %(release)s THEN LEAST(
                runs.lease_expires, (SELECT min(d.due_at) FROM due d WHERE d.run_id = runs.id))
            WHEN runs.lifecycle = ANY(%(runnable)s::text[]) THEN runs.created_at
            ELSE (SELECT min(d.due_at) FROM due d WHERE d.run_id = runs.id)
        END
    FROM (SELECT owner AS old_owner, wake_at AS old_wake FROM runs WHERE id = %(run_id)s) AS old
    WHERE runs.id = %(run_id)s
    RETURNING runs.owner, runs.wake_at, old.old_owner, old.old_wake
)
SELECT pg_notify(
    current_setting('flowtide.channel'),
    CASE WHEN sooner.needed OR NOT %(by_holder)s THEN 'wake:' ELSE 'told:' END
        || left(%(run_id)s, 200)
)
FROM settled, LATERAL (
    SELECT COALESCE(
        settled.wake_at IS NOT NULL
        -- (a run its holder changed: the holder knows)
        AND (settled.owner IS NULL OR NOT %(by_holder)s)
        AND (
            settled.old_wake IS NULL
            OR settled.wake_at < settled.old_wake
            OR (settled.owner IS NULL AND settled.old_owner IS NOT NULL)
        ),
        FALSE
    ) AS needed
) AS sooner
WHERE %(tell)s OR sooner.needed;

-- ---------------------------------------------------------------------------------------------
-- Leases

-- name: claim_runs
-- Runs whose wake has come that nobody else holds, earliest first; a row another claim (or a
-- commit) has locked is skipped, so overlapping claims never take one run twice. "Now" is the
-- database's clock unless an instant is given (a store used on one machine's or a virtual
-- clock); the lease runs for the term asked from then. Each comes with the other owner it was
-- taken from, if any (read from the row locked, before the update).
WITH clock AS (
    SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now
), claimable AS (
    SELECT runs.id, runs.wake_at, runs.owner AS held_by, clock.now FROM runs, clock
    -- (Its now as a value of its own, so that the index on wake_at stops at the first run not
    -- due: a join with the clock would read every run with a wake instant.)
    WHERE runs.wake_at <= (SELECT now FROM clock)
        AND (runs.owner IS NULL OR runs.owner = %(owner)s OR runs.lease_expires <= clock.now)
    ORDER BY runs.wake_at, runs.id
    LIMIT %(limit)s
    FOR UPDATE OF runs SKIP LOCKED
), claimed AS (
    UPDATE runs SET
        epoch = CASE WHEN runs.owner = %(owner)s THEN runs.epoch ELSE runs.epoch + 1 END,
        owner = %(owner)s,
        lease_expires = claimable.now + %(term)s::interval,
        wake_at = CASE
            WHEN runs.lifecycle = ANY(%(ended)s::text[]) THEN NULL
            ELSE LEAST(
                claimable.now + %(term)s::interval,
                (SELECT min(d.due_at) FROM due d WHERE d.run_id = runs.id))
        END
    FROM claimable
    -- (The ids as an array too: each run's row found by its key, however many rows a plan
    -- made for any limit expects.)
    WHERE runs.id = ANY(ARRAY(SELECT id FROM claimable)) AND runs.id = claimable.id
    RETURNING runs.id, runs.owner, runs.epoch, runs.lease_expires, claimable.wake_at AS woke,
        nullif(claimable.held_by, %(owner)s) AS taken_from
)
SELECT id, owner, epoch, lease_expires, taken_from FROM claimed ORDER BY woke, id;

-- name: acquire_run
-- One run, whatever its wake, unless it has ended or another owner's lease is alive now (with
-- force, taken from it all the same). "Now" as for claim_runs; the other owner it was taken
-- from, if any, as for claim_runs (the row is locked before it is read).
WITH clock AS (
    SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now
), held AS (
    SELECT runs.id, runs.owner AS held_by, clock.now FROM runs, clock
    WHERE runs.id = %(run_id)s
        AND NOT runs.lifecycle = ANY(%(ended)s::text[])
        AND (runs.owner IS NULL OR runs.owner = %(owner)s
            OR runs.lease_expires <= clock.now OR %(force)s)
    FOR UPDATE OF runs
)
UPDATE runs SET
    epoch = CASE WHEN runs.owner = %(owner)s THEN runs.epoch ELSE runs.epoch + 1 END,
    owner = %(owner)s,
    lease_expires = held.now + %(term)s::interval,
    wake_at = LEAST(
        held.now + %(term)s::interval,
        (SELECT min(d.due_at) FROM due d WHERE d.run_id = runs.id))
FROM held
WHERE runs.id = held.id
RETURNING runs.id, runs.owner, runs.epoch, runs.lease_expires,
    nullif(held.held_by, %(owner)s) AS taken_from;

-- name: renew_leases
-- Rows are locked in id order, as every statement taking several runs does. Each lease runs
-- for the term asked from "now" (as for claim_runs), or to the instant given if no term is.
-- Only the runs %(run_ids)s, if given.
WITH clock AS (
    SELECT coalesce(%(now)s::timestamptz, clock_timestamp()) AS now
), held AS (
    SELECT id FROM runs
    WHERE owner = %(owner)s
        AND (%(run_ids)s::text[] IS NULL OR id = ANY(%(run_ids)s::text[]))
    ORDER BY id FOR UPDATE
)
UPDATE runs SET
    lease_expires = coalesce(clock.now + %(term)s::interval, %(expires)s),
    wake_at = CASE
        WHEN runs.lifecycle = ANY(%(ended)s::text[]) THEN NULL
        ELSE LEAST(
            coalesce(clock.now + %(term)s::interval, %(expires)s),
            (SELECT min(d.due_at) FROM due d WHERE d.run_id = runs.id))
    END
FROM held, clock
WHERE runs.id = held.id
RETURNING runs.id, runs.owner, runs.epoch, runs.lease_expires;

-- name: release_runs
-- Given back: each run's wake is then that of a run nobody holds. The store's channel is told
-- (once: one payload, the first id released) that runs wait for a worker.
WITH held AS (
    SELECT id FROM runs WHERE owner = %(owner)s ORDER BY id FOR UPDATE
), released AS (
    UPDATE runs SET
        owner = NULL,
        lease_expires = NULL,
        wake_at = CASE
            WHEN runs.lifecycle = ANY(%(ended)s::text[]) THEN NULL
            WHEN runs.lifecycle = ANY(%(runnable)s::text[]) THEN runs.created_at
            ELSE (SELECT min(d.due_at) FROM due d WHERE d.run_id = runs.id)
        END
    FROM held
    WHERE runs.id = held.id
    RETURNING runs.id
)
SELECT released.id, pg_notify(current_setting('flowtide.channel'), 'wake:' || left(first.id, 200))::text
FROM released, (SELECT min(id) AS id FROM released) AS first
ORDER BY released.id;

-- name: take_lease
-- A commit that takes its run's lease (Commit.take), after advance_run has locked the run's row
-- (a commit sent whole takes it in commit_whole instead): fails (see flowtide_commit_guard)
-- unless nobody has held the run since epoch
-- %(epoch)s - 1, or %(owner)s holds it at %(epoch)s already; then held by %(owner)s at %(epoch)s
-- for %(term)s from %(now)s (the database's clock if NULL). (settle_run, after it, brings the
-- wake instant up to date.)
WITH taken AS (
    UPDATE runs SET
        owner = %(owner)s,
        epoch = %(epoch)s,
        lease_expires = coalesce(%(now)s::timestamptz, clock_timestamp()) + %(term)s::interval
    WHERE id = %(run_id)s
        AND (
            (owner IS NULL AND epoch = %(epoch)s::bigint - 1)
            OR (owner = %(owner)s::text AND epoch = %(epoch)s::bigint)
        )
    RETURNING 1
)
SELECT flowtide_commit_guard(EXISTS (SELECT 1 FROM taken));

-- name: lease_of
SELECT id, owner, epoch, lease_expires FROM runs WHERE id = %(run_id)s;

-- name: next_wake
SELECT min(wake_at) FROM runs WHERE wake_at IS NOT NULL;

-- ---------------------------------------------------------------------------------------------
-- Reads. A read of one run's rows joins them to the run, so that one statement also tells an
-- unknown run (no row at all) from a run that has none (one row of NULLs).

-- name: get_run
SELECT
    id, flow_id, flow_version, lifecycle, created_at, deadline, started_at, finished_at,
    parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint
FROM runs WHERE id = %(run_id)s;

-- name: list_runs
SELECT
    id, flow_id, flow_version, lifecycle, created_at, deadline, started_at, finished_at,
    parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint
FROM runs ORDER BY ord;

-- name: list_runs_by_lifecycle
SELECT
    id, flow_id, flow_version, lifecycle, created_at, deadline, started_at, finished_at,
    parent_run_id, parent_token_id, depth, outcome, result, options, checkpoint
FROM runs WHERE lifecycle = %(lifecycle)s ORDER BY ord;

-- name: get_state
SELECT s.key, s.value
FROM runs r LEFT JOIN state s ON s.run_id = r.id
WHERE r.id = %(run_id)s
ORDER BY s.ord;

-- name: tokens
SELECT
    t.id, t.placement, t.status, t.attempt, t.visit, t.lineage, t.deadline, t.due, t.created_at,
    t.data, t.epoch
FROM runs r LEFT JOIN tokens t ON t.run_id = r.id
WHERE r.id = %(run_id)s
ORDER BY t.ord;

-- name: tokens_by_status
SELECT
    t.id, t.placement, t.status, t.attempt, t.visit, t.lineage, t.deadline, t.due, t.created_at,
    t.data, t.epoch
FROM runs r LEFT JOIN tokens t ON t.run_id = r.id AND t.status = ANY(%(statuses)s::text[])
WHERE r.id = %(run_id)s
ORDER BY t.ord;

-- name: token
SELECT
    t.id, t.placement, t.status, t.attempt, t.visit, t.lineage, t.deadline, t.due, t.created_at,
    t.data, t.epoch
FROM runs r LEFT JOIN tokens t ON t.run_id = r.id AND t.id = %(token_id)s
WHERE r.id = %(run_id)s;

-- name: history
SELECT e.seq, e.kind, e.at, e.placement, e.attempt, e.token_id, e.data
FROM runs r LEFT JOIN events e ON e.run_id = r.id AND e.seq > %(after)s
WHERE r.id = %(run_id)s
ORDER BY e.seq;

-- name: due_of
SELECT d.due_at, d.token_id, d.purpose
FROM runs r LEFT JOIN due d ON d.run_id = r.id
WHERE r.id = %(run_id)s
ORDER BY d.due_at, d.set_order;

-- name: put_flow
INSERT INTO flows (flow_id, digest, version, document, stored_at)
VALUES (%(flow_id)s, %(digest)s, %(version)s, %(document)s, %(stored_at)s)
ON CONFLICT (flow_id, digest) DO NOTHING
RETURNING digest;

-- name: latest_flow
-- The document of a flow id stored last.
SELECT version, digest, document FROM flows WHERE flow_id = %(flow_id)s
ORDER BY stored_order DESC LIMIT 1;

-- name: flow_versions
-- Every stored document (of flow_id unless it is NULL), by id then in the order first stored,
-- with the number of runs started on it and whether it is its id's latest.
SELECT
    flows.flow_id, flows.version, flows.digest, flows.stored_at,
    (
        SELECT count(*) FROM runs
        WHERE runs.flow_id = flows.flow_id
          AND (runs.options ->> 'flow_digest') COLLATE "C" = flows.digest
    ) AS runs,
    flows.stored_order = (
        SELECT max(later.stored_order) FROM flows AS later WHERE later.flow_id = flows.flow_id
    ) AS latest
FROM flows
WHERE %(flow_id)s::text IS NULL OR flows.flow_id = %(flow_id)s
ORDER BY flows.flow_id, flows.stored_order;

-- name: get_flow
SELECT version, document FROM flows WHERE flow_id = %(flow_id)s AND digest = %(digest)s;

-- name: node_anchor
SELECT at FROM node_anchors
WHERE run_id = %(run_id)s AND placement = %(placement)s
    AND item_key = COALESCE('=' || %(item)s::text, '');

-- name: node_anchors
SELECT placement, item, at FROM node_anchors WHERE run_id = %(run_id)s ORDER BY ord;

-- name: parks_by_run
SELECT
    id, run_id, token_id, placement, visit, epoch, parked_at, deadline, key, payload, status,
    closed_at, closed_by
FROM parks
WHERE run_id = %(run_id)s
    AND (%(placement)s::text IS NULL OR placement = %(placement)s::text)
    AND (NOT %(open_only)s OR status = %(parked)s)
ORDER BY ord;

-- name: parks_by_key
SELECT
    id, run_id, token_id, placement, visit, epoch, parked_at, deadline, key, payload, status,
    closed_at, closed_by
FROM parks
WHERE key = %(key)s
    AND (%(run_id)s::text IS NULL OR run_id = %(run_id)s::text)
    AND (%(placement)s::text IS NULL OR placement = %(placement)s::text)
    AND (NOT %(open_only)s OR status = %(parked)s)
ORDER BY ord;

-- name: signal_answer
SELECT key, run_id, answer FROM signal_answers WHERE key = %(key)s;

-- name: signal_request
SELECT id, run_id, requested_at, request, answer, answered_at
FROM signal_requests WHERE id = %(id)s;

-- name: pending_requests
-- A run's unanswered requests, oldest first (none once the run has ended).
SELECT r.id, r.run_id, r.requested_at, r.request, r.answer, r.answered_at
FROM signal_requests AS r JOIN runs ON runs.id = r.run_id
WHERE r.run_id = %(run_id)s AND r.answer IS NULL AND runs.lifecycle <> ALL(%(ended)s::text[])
ORDER BY r.requested_at, r.id;

-- name: scatter_items
SELECT run_id, progress, item_index, status, output, result, key, item_order
FROM scatter_items
WHERE run_id = %(run_id)s AND progress = %(progress)s
ORDER BY item_index;

-- -- finding runs by the start of their id, and pruning ended runs ------------

-- name: run_ids_between
-- Ids from prefix up to (not including) end: those that start with prefix (ids are COLLATE "C").
SELECT id FROM runs WHERE id >= %(prefix)s AND id < %(end)s ORDER BY id LIMIT %(limit)s;

-- name: run_ids_from
-- Ids from prefix on (for a prefix that no text follows, see flowtide.store.base.prefix_end).
SELECT id FROM runs WHERE id >= %(prefix)s ORDER BY id LIMIT %(limit)s;

-- name: prunable_runs
-- Runs that ended before ended_before and are no child of a run that has not ended. FOR UPDATE:
-- a prune and another one (or a run's parent) racing wait for one another.
SELECT r.id FROM runs r
WHERE r.lifecycle = ANY(%(ended)s::text[]) AND r.id > %(after)s
    AND coalesce(r.finished_at, r.created_at) < %(ended_before)s
    AND coalesce(  -- (no parent, or an ended one; its row found by its key for each run)
        (SELECT p.lifecycle = ANY(%(ended)s::text[]) FROM runs p WHERE p.id = r.parent_run_id),
        TRUE
    )
ORDER BY r.id LIMIT %(limit)s;

-- name: lock_pruned
-- The runs of a batch, locked: those another prune took first are skipped.
SELECT id FROM runs WHERE id = ANY(%(ids)s::text[]) ORDER BY id FOR UPDATE SKIP LOCKED;

-- name: prune_state
DELETE FROM state WHERE run_id = ANY(%(ids)s::text[]);

-- name: prune_tokens
DELETE FROM tokens WHERE run_id = ANY(%(ids)s::text[]);

-- name: prune_history
DELETE FROM events WHERE run_id = ANY(%(ids)s::text[]);

-- name: prune_due
DELETE FROM due WHERE run_id = ANY(%(ids)s::text[]);

-- name: prune_anchors
DELETE FROM node_anchors WHERE run_id = ANY(%(ids)s::text[]);

-- name: prune_parks
DELETE FROM parks WHERE run_id = ANY(%(ids)s::text[]);

-- name: prune_signal_answers
DELETE FROM signal_answers WHERE run_id = ANY(%(ids)s::text[]);

-- name: prune_signal_requests
DELETE FROM signal_requests WHERE run_id = ANY(%(ids)s::text[]);

-- name: prune_scatter_items
DELETE FROM scatter_items WHERE run_id = ANY(%(ids)s::text[]);

-- name: prune_runs
DELETE FROM runs WHERE id = ANY(%(ids)s::text[]);

-- ---------------------------------------------------------------------------------------------
-- A run's snapshot (load_run), in one statement

-- name: load_runs_whole
-- Everything a rebuild of each of the runs %(run_ids)s reads (as SQLite's load_run_record,
-- get_state, tokens, history_after_checkpoint, open parks_by_run, node_anchors and due_of give
-- it), in one statement and so at one snapshot: a row per run found, its id and one JSON array
-- of its record with who holds it, then an array of rows (or NULL: none) of each. JSON columns
-- are given as their text, instants in ISO 8601.
SELECT r.id, json_build_array(
    json_build_array(
        r.id, r.flow_id, r.flow_version, r.lifecycle, r.created_at, r.deadline, r.started_at,
        r.finished_at, r.parent_run_id, r.parent_token_id, r.depth, r.outcome, r.result::text,
        r.options::text, r.checkpoint::text, r.owner, r.epoch, r.lease_expires
    ),
    (
        SELECT json_agg(json_build_array(s.key, s.value::text) ORDER BY s.ord)
        FROM state s WHERE s.run_id = r.id
    ),
    (
        SELECT json_agg(
            json_build_array(
                t.id, t.placement, t.status, t.attempt, t.visit, t.lineage::text, t.deadline,
                t.due, t.created_at, t.data::text, t.epoch
            )
            ORDER BY t.ord
        )
        FROM tokens t WHERE t.run_id = r.id
    ),
    (
        SELECT json_agg(
            json_build_array(e.seq, e.kind, e.at, e.placement, e.attempt, e.token_id, e.data::text)
            ORDER BY e.seq
        )
        FROM events e
        WHERE e.run_id = r.id AND e.seq > COALESCE((r.checkpoint ->> 'seq')::bigint, 0)
    ),
    (
        SELECT json_agg(
            json_build_array(
                p.id, p.run_id, p.token_id, p.placement, p.visit, p.epoch, p.parked_at,
                p.deadline, p.key, p.payload::text, p.status, p.closed_at, p.closed_by
            )
            ORDER BY p.ord
        )
        FROM parks p WHERE p.run_id = r.id AND p.status = %(parked)s
    ),
    (
        SELECT json_agg(json_build_array(a.placement, a.item, a.at) ORDER BY a.ord)
        FROM node_anchors a WHERE a.run_id = r.id
    ),
    (
        SELECT json_agg(json_build_array(d.due_at, d.token_id, d.purpose) ORDER BY d.due_at, d.set_order)
        FROM due d WHERE d.run_id = r.id
    )
)::text
FROM runs r WHERE r.id = ANY(%(run_ids)s::text[]);

-- name: begin_snapshot
-- A transaction every read of which sees the database as of one instant.
BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY;

-- -- workers' heartbeats ------------

-- name: record_worker
INSERT INTO workers (worker_id, host, pid, started_at, last_seen, lease_ttl, runs_held, nodes, waiting)
VALUES (%(worker_id)s, %(host)s, %(pid)s, %(started_at)s, %(last_seen)s, %(lease_ttl)s, %(runs_held)s, %(nodes)s, %(waiting)s)
ON CONFLICT (worker_id) DO UPDATE SET
    host = excluded.host, pid = excluded.pid, started_at = excluded.started_at,
    last_seen = excluded.last_seen, lease_ttl = excluded.lease_ttl,
    runs_held = excluded.runs_held, nodes = excluded.nodes, waiting = excluded.waiting;

-- name: workers
SELECT worker_id, host, pid, started_at, last_seen, lease_ttl, runs_held, nodes, waiting
FROM workers ORDER BY worker_id;

-- name: forget_worker
DELETE FROM workers WHERE worker_id = %(worker_id)s RETURNING worker_id;
