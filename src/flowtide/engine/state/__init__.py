"""The run state: a node's copy of it, how changes commit through reducers, limits, paths."""
