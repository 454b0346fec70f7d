-- A commit sent whole, in one round trip, before its run was read: its first statement asks
-- flowtide_commit_guard whether what it was decided on still holds (the run exists, held under
-- the commit's lease, in a lifecycle it allows). If not, the statement fails, so does every
-- statement after it, and the store rolls the transaction back, reads the run and tells why.
-- min_reader_version: 5

CREATE FUNCTION flowtide_commit_guard(holds BOOLEAN) RETURNS BOOLEAN
LANGUAGE plpgsql AS $$
BEGIN
    IF holds IS NOT TRUE THEN
        RAISE EXCEPTION 'a commit''s run is not as the commit was decided on'
            USING ERRCODE = 'FT001';
    END IF;
    RETURN TRUE;
END;
$$;
