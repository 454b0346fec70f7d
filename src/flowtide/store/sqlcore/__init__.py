"""What the SQL stores (SQLite, PostgreSQL) share: a commit's records as the parameters of
their statements (:mod:`~flowtide.store.sqlcore.params`), and the statements that write it
(:mod:`~flowtide.store.sqlcore.writes`), by one set of names. Each store keeps its dialect in
its ``queries.sql`` and a :class:`~flowtide.store.sqlcore.params.Dialect`, and runs the
statements on its own connection."""
