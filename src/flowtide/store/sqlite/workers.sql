-- Workers' heartbeats (see workers.py).

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
DELETE FROM workers WHERE worker_id = :worker_id;
