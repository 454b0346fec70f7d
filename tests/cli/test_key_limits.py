"""Keys and ids over their limits, given on the command line, are bad input (exit 2, one
line naming the value), refused before anything is stored."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from flowtide.cli import ExitCode, app

runner = CliRunner()
CHECKOUT = Path(__file__).resolve().parents[2] / "examples" / "checkout-node-anchor.yaml"


def test_a_run_id_or_an_idempotency_key_over_its_limit_is_bad_input(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    checkout = str(CHECKOUT)
    args = ["--store", store, "--nodes", "flowtide.demo.checkout"]
    started = runner.invoke(app, ["start", checkout, *args, "--run-id", "r" * 300])
    assert started.exit_code == ExitCode.BAD_INPUT, started.output
    assert "run id 'rrrr" in started.output and "over the limit of 255" in started.output
    signalled = runner.invoke(
        app, ["signal", "--key", "k", "--idempotency-key", "i" * 2_000, *args]
    )
    assert signalled.exit_code == ExitCode.BAD_INPUT, signalled.output
    assert "idempotency key 'iiii" in signalled.output
