"""Flowtide: a durable workflow engine for Python."""

__version__ = "0.1.0"
