"""The PostgreSQL store's schema, one ``NNNN_name.sql`` file per version, applied in order."""
