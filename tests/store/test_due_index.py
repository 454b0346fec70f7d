"""The memory store's due index agrees with a plain model of due entries."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from flowtide.store import DueEntry
from flowtide.store.dueindex import DueIndex

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_due_index_agrees_with_a_plain_model_over_random_operations() -> None:
    # Setting, replacing, dropping, clearing and claiming any mix of purposes must read as one
    # entry per (token, purpose), claimed earliest first, however stale the heap gets.
    rng = random.Random(7)
    purposes = ["", "timeout", "timer:1:0", "timer:1:1"]
    for _ in range(30):
        index = DueIndex()
        model: dict[tuple[str, str], tuple[datetime, int]] = {}
        order = 0
        for _ in range(200):
            token = f"r.{rng.randint(1, 3)}"
            purpose = rng.choice(purposes)
            op = rng.random()
            if op < 0.55:
                when = at(rng.randint(0, 40))
                index.set(DueEntry(when, "r", token, purpose))
                model[(token, purpose)] = (when, order)
                order += 1
            elif op < 0.7:
                index.drop(token, purpose)
                model.pop((token, purpose), None)
            elif op < 0.85:
                index.clear(token)
                model = {k: v for k, v in model.items() if k[0] != token}
            else:
                now = at(rng.randint(0, 40))
                limit = rng.randint(1, 4)
                claimed = index.claim(now, limit)
                due = sorted((v, k) for k, v in model.items() if v[0] <= now)[:limit]
                assert [(e.token_id, e.purpose) for e in claimed] == [k for _, k in due]
                for e in claimed:
                    assert model.pop((e.token_id, e.purpose))[0] == e.when
            entries = index.entries()
            assert [(e.token_id, e.purpose) for e in entries] == [
                k for _, k in sorted((v, k) for k, v in model.items())
            ]
            assert index.next_due() == (min(v[0] for v in model.values()) if model else None)
