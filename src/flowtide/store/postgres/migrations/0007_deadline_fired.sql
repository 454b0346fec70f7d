-- The latest deadline a commit of each run fired: a signal request of the run is recorded no
-- earlier (as on SQLite), whichever clock the request is judged by.
-- min_reader_version: 6

ALTER TABLE runs ADD COLUMN deadline_fired TIMESTAMPTZ;
