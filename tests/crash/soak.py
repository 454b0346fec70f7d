"""Soak runs of the crash and race tests, as many as asked (seeded, repeatable)::

    python -m tests.crash.soak --store sqlite --rounds 200
    python -m tests.crash.soak --store postgres --rounds 200 --seed 1000
    python -m tests.crash.soak --race --tries 10000
    python -m tests.crash.soak --outages --rounds 50

``--outages`` plays the rounds on PostgreSQL, the workers reaching it through a proxy that
goes down a few times in each (see ``tests/crash/outages.py``). ``--store postgres`` uses
``FLOWTIDE_TEST_POSTGRES_URL`` (default: the local test server) with a fresh schema, dropped at
the end. Prints one line per round and exits 1 at the first problem.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

from tests.crash.harness import play
from tests.crash.outages import play_through_outages
from tests.crash.race import race
from tests.postgres_schemas import Schemas

DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/test"


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.crash.soak")
    parser.add_argument("--store", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0, help="the first round's seed")
    parser.add_argument("--race", action="store_true", help="signal/deadline races instead")
    parser.add_argument("--tries", type=int, default=10_000, help="races (with --race)")
    parser.add_argument(
        "--outages", action="store_true", help="PostgreSQL rounds through database outages"
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="flowtide-soak-"))
    schemas = Schemas(os.environ.get("FLOWTIDE_TEST_POSTGRES_URL", DEFAULT_POSTGRES))
    try:
        if args.race:
            url = f"{schemas.url}?schema={schemas.new()}"
            raced = asyncio.run(race(url, args.seed, folder / "workers.log", tries=args.tries))
            print(
                f"{raced.tries} races: signal won {raced.signal_won}, deadline won "
                f"{raced.deadline_won}, problems {len(raced.problems)}"
            )
            for problem in raced.problems[:20]:
                print(f"  {problem}")
            return 1 if raced.problems else 0
        for seed in range(args.seed, args.seed + args.rounds):
            if args.store == "sqlite" and not args.outages:
                url = f"sqlite:///{folder / f'runs-{seed}.db'}"
            else:
                url = f"{schemas.url}?schema={schemas.new()}"
            rounds = play_through_outages if args.outages else play
            played = asyncio.run(rounds(url, seed, folder / "workers.log"))
            print(
                f"seed {seed}: killed after {played.killed_after:.3f} s, "
                f"{len(played.runs)} runs, {len(played.problems)} problems",
                flush=True,
            )
            if played.problems:
                for problem in played.problems:
                    print(f"  {problem}")
                print(f"  workers' log: {folder / 'workers.log'}")
                return 1
        return 0
    finally:
        if args.store == "postgres" or args.race or args.outages:
            schemas.drop_all()


if __name__ == "__main__":
    sys.exit(main())
