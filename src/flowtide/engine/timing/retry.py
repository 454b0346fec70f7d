"""Retry decisions: which failures are retried, and how long to wait before the next attempt."""

from __future__ import annotations

import random
from datetime import timedelta

from flowtide.model.settings import Backoff, RetryPolicy

__all__ = ["backoff_delay", "matches_retry_on", "should_retry"]


def matches_retry_on(exc: BaseException, names: tuple[str, ...]) -> bool:
    """True if ``exc``'s class or a base class is named in ``names`` (plain or dotted name).

    An empty ``names`` matches every ``Exception``.
    """
    if not names:
        return isinstance(exc, Exception)
    wanted = set(names)
    for cls in type(exc).__mro__:
        if cls.__name__ in wanted or f"{cls.__module__}.{cls.__qualname__}" in wanted:
            return True
    remote: tuple[str, ...] = getattr(exc, "remote_mro", ())
    return any(n in wanted or n.rpartition(".")[2] in wanted for n in remote)


def should_retry(policy: RetryPolicy | None, exc: BaseException, attempt: int) -> bool:
    """Whether a failed ``attempt`` (1-based) is followed by another."""
    if policy is None or attempt >= policy.max_attempts:
        return False
    return matches_retry_on(exc, policy.retry_on)


def backoff_delay(
    policy: RetryPolicy,
    attempt: int,
    *,
    previous: timedelta | None = None,
    rng: random.Random | None = None,
) -> timedelta:
    """The wait after failed ``attempt`` (1-based), before the next one, capped at ``max``.

    * fixed: ``initial``;
    * linear: ``initial * attempt``;
    * exponential: ``initial * factor ** (attempt - 1)``;
    * decorrelated_jitter: uniform between ``initial`` and ``previous * factor`` (``previous`` is
      the last wait, ``initial`` at first), the AWS "decorrelated jitter" rule; ``rng`` is the
      random source (inject a seeded one for exact tests).
    """
    initial = policy.initial
    if policy.backoff is Backoff.FIXED:
        delay = initial
    elif policy.backoff is Backoff.LINEAR:
        delay = initial * attempt
    elif policy.backoff is Backoff.EXPONENTIAL:
        delay = initial * (policy.factor ** (attempt - 1))
    else:
        source = rng or random.Random()
        prev = previous if previous is not None else initial
        high = max(initial, prev * policy.factor)
        low_s, high_s = initial.total_seconds(), high.total_seconds()
        delay = timedelta(seconds=source.uniform(low_s, high_s))
    if policy.max is not None and delay > policy.max:
        delay = policy.max
    return delay
