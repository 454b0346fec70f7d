"""What the SQL stores (SQLite, PostgreSQL) share, written once: the reads
(:mod:`~flowtide.store.sqlcore.reads`), leases (:mod:`~flowtide.store.sqlcore.leases`), stored
flows, workers' heartbeats, a commit's records as parameters
(:mod:`~flowtide.store.sqlcore.params`), the facts it is checked against
(:mod:`~flowtide.store.sqlcore.facts`) and the statements that write it
(:mod:`~flowtide.store.sqlcore.writes`), one decoder of their rows
(:mod:`~flowtide.store.sqlcore.rows`), and the work of a write transaction that reads as it
goes, as scripts (:mod:`~flowtide.store.sqlcore.script`): a commit checked on its run and a new
run (:mod:`~flowtide.store.sqlcore.commits`), a signal request
(:mod:`~flowtide.store.sqlcore.requests`), a prune (:mod:`~flowtide.store.sqlcore.pruning`).

Statements are named alike in both stores' ``queries.sql``, which say them each in its dialect
(a name only one store needs is listed as its own: ``OWN_QUERIES``). Each store provides a
:class:`~flowtide.store.sqlcore.connector.Connector` (run a named statement, get its rows, or
drive a script in one write transaction: SQLite in its thread, PostgreSQL on a pooled connection
in a pipeline) and a :class:`~flowtide.store.sqlcore.params.Dialect` (how it binds and gives
back instants, JSON, lists and anchor items); what is left to each store is its connections,
transactions, locking and notices, and PostgreSQL's commits sent whole (one statement each,
checked by its guard) with group commit."""
