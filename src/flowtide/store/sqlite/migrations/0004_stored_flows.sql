-- Stored flows by id: when each document was first stored, and the runs started on each one.
--
-- (Code that knows only older versions would store documents without their instant and
-- order, which could then never be the latest of their id: it may not use this schema.)

ALTER TABLE flows ADD COLUMN stored_at INTEGER;
-- The order documents were first stored in (a rowid may change in a VACUUM): the last of an id
-- is its latest.
ALTER TABLE flows ADD COLUMN stored_order INTEGER;
UPDATE flows SET stored_order = rowid;
CREATE INDEX flows_by_order ON flows (flow_id, stored_order);

-- A document stored before this version: first stored, at the latest, when its first run was
-- created.
UPDATE flows SET stored_at = (
    SELECT MIN(runs.created_at) FROM runs
    WHERE runs.flow_id = flows.flow_id
      AND json_extract(runs.options, '$.flow_digest') = flows.digest
);

-- How many runs each document has (flowtide flows).
CREATE INDEX runs_by_flow_document ON runs (flow_id, json_extract(options, '$.flow_digest'));
