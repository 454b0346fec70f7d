"""The SQLite store's schema, one numbered ``.sql`` file per version (applied in order)."""
