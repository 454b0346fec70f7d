"""A run's executor as parts: what falls due for a run, what its tokens carry, and the
decisions taken on a run's view (joins, ...), each usable and tested without an engine."""
