"""What the SQL stores (SQLite, PostgreSQL) share, written once: the reads
(:mod:`~flowtide.store.sqlcore.reads`), leases (:mod:`~flowtide.store.sqlcore.leases`), stored
flows, workers' heartbeats, a new run (:mod:`~flowtide.store.sqlcore.creation`), a commit's
records as parameters (:mod:`~flowtide.store.sqlcore.params`) and the statements that write it
(:mod:`~flowtide.store.sqlcore.writes`), and one decoder of their rows
(:mod:`~flowtide.store.sqlcore.rows`).

Statements are named alike in both stores' ``queries.sql``, which say them each in its dialect
(a name only one store needs is listed as its own: ``OWN_QUERIES``). Each store provides a
:class:`~flowtide.store.sqlcore.connector.Connector` (run a named statement, get its rows: SQLite
in its thread, PostgreSQL on a pooled connection) and a
:class:`~flowtide.store.sqlcore.params.Dialect` (how it binds and gives back instants, JSON, lists
and anchor items); what is left to each store is its connections, transactions, locking and
notices."""
