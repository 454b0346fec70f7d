"""Time: cancel scopes, windows and timers resolved to instants, retries, the engine's clock,
and explain (how a deadline was computed)."""
