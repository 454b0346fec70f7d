-- Each run counts its history on its own row: a commit numbers its events from runs.last_seq,
-- read and advanced by the one UPDATE that also reads what the commit is checked against,
-- instead of reading max(seq) from the history.
--
-- (No min_reader_version line: earlier code appends history without advancing the counter.)

ALTER TABLE runs ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0;

UPDATE runs SET last_seq = coalesce((SELECT max(seq) FROM history WHERE history.run_id = runs.id), 0);
