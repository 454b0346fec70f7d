"""An executing engine's work: the host it gives run executors, leases, the sweeper, heartbeats,
presence, threads and processes for sync nodes, background tasks, hooks and instruments."""
