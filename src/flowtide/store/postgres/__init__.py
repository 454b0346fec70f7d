"""The PostgreSQL store: :class:`PostgresStore`, for many workers on many machines sharing one
database (``pip install 'flowtide[postgres]'``)."""

from flowtide.store.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
