-- Requests: a cancel may be recorded as a request too (its request's "kind" says which); a
-- run's unanswered requests are found by run, oldest first (a commit that fires a deadline
-- looks for those recorded before it).
-- min_reader_version: 3
--
-- (Code that knows only version 2 would apply a cancel request as a signal, and refuse it.)

CREATE INDEX signal_requests_pending ON signal_requests (run_id, requested_at)
WHERE answer IS NULL;
