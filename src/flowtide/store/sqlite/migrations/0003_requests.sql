-- Requests: a cancel may be recorded as a request too (its request's "kind" says which), and a
-- commit that fires a deadline leaves its instant on the run, so that a request recorded after
-- it is recorded no earlier (requests and deadline firings of a run are ordered as applied).
-- min_reader_version: 3
--
-- (Code that knows only version 2 would apply a cancel request as a signal, and refuse it.)

ALTER TABLE runs ADD COLUMN deadline_fired INTEGER;

CREATE INDEX signal_requests_pending ON signal_requests (run_id, requested_at)
WHERE answer IS NULL;
