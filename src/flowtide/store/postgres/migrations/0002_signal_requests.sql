-- Signal requests: signals sent to a run another worker holds, for that worker to apply. Each
-- comes with a due entry (purpose 'signal', the request's id as its token id) that wakes the
-- run's holder.
-- min_reader_version: 2
--
-- (Code that knows only version 1 would fire such an entry as a stale one and drop it, leaving
-- its request unanswered: it may not use this schema.)

CREATE TABLE signal_requests (
    id TEXT COLLATE "C" PRIMARY KEY,
    run_id TEXT COLLATE "C" NOT NULL,
    requested_at TIMESTAMPTZ NOT NULL,
    request JSON NOT NULL,
    -- NULL until answered.
    answer JSON,
    answered_at TIMESTAMPTZ
);
