"""What the commands that start runs read from their options: the flows of a document (checked
against the user's code), the initial state, a deadline; and how lifecycles are coloured."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from flowtide.cli.code import Code
from flowtide.cli.common import BadInput, display_path, print_problems
from flowtide.cli.loading import load_files
from flowtide.engine import Lifecycle
from flowtide.engine.state.limits import (
    MAX_NESTING,
    ValueTooDeepError,
    ValueTooLargeError,
    check_nesting,
    check_size,
    check_sizes,
)
from flowtide.errors import Problem
from flowtide.model.durations import parse_duration
from flowtide.model.flow import Flow
from flowtide.store.jsonvalues import NotJSONError

LIFECYCLE_STYLE = {
    Lifecycle.COMPLETED: "green",
    Lifecycle.FAILED: "red",
    Lifecycle.CANCELLED: "yellow",
    Lifecycle.TIMED_OUT: "yellow",
}


def parse_state(text: str, option: str = "--input") -> dict[str, Any]:
    """``--input`` (or ``option``): a JSON object the engine would keep, or bad input naming
    where it is wrong (text that is not UTF-8, NaN or infinite numbers, a lone surrogate, more
    than :data:`~flowtide.engine.state.limits.MAX_NESTING` levels), before anything is stored."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:  # (bytes that are not UTF-8 reach argv as surrogates)
        raise BadInput(f"{option} is not UTF-8 text (at {_place(text, exc.start)})") from None
    # The nesting is judged on the text first, the same on every Python (whose JSON decoder
    # gives up at a depth of its own): an input's object is one level, its values at most
    # MAX_NESTING each; a payload is one value.
    own = 1 if option == "--input" else 0
    try:
        check_nesting(text, option, MAX_NESTING + own)
    except ValueTooDeepError as exc:
        each = "each value of the state" if own else "a payload"
        raise BadInput(
            f"{option} nests lists and objects {exc.depth} levels deep; {each} may nest at "
            f"most {MAX_NESTING}"
        ) from None
    try:
        value = _DECODER.decode(text)
    except _NotANumber as exc:
        raise BadInput(
            f"{option}: {exc.number} is not a JSON number (at {_place(text, exc.at(text))})"
        ) from None
    except json.JSONDecodeError as exc:
        raise BadInput(f"{option} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        what = "the run's initial state" if option == "--input" else "merged into the state"
        raise BadInput(f"{option} must be a JSON object ({what})")
    try:
        # As the engine checks it: the input key by key, a payload whole.
        if option == "--input":
            check_sizes(value, option, None)
        else:
            check_size(value, option, None)
    except (NotJSONError, ValueTooLargeError) as exc:
        raise BadInput(str(exc)) from None
    return value


class _NotANumber(ValueError):
    """``NaN``, ``Infinity`` or a number too large for a float: Python reads them, JSON has
    none of them and no store keeps them."""

    def __init__(self, number: str) -> None:
        super().__init__(number)
        self.number = number

    def at(self, text: str) -> int:
        found = re.search(rf"(?<![\w.+-]){re.escape(self.number)}(?![\w.])", text)
        return found.start() if found else 0


def _constant(name: str) -> Any:
    raise _NotANumber(name)


def _finite(number: str) -> float:
    value = float(number)
    if not math.isfinite(value):
        raise _NotANumber(number)
    return value


_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_finite)


def _place(text: str, index: int) -> str:
    """``line 1, column 8`` of ``text[index]``."""
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}"


def parse_deadline(text: str | None) -> timedelta | datetime | None:
    """``--deadline``: a duration (ISO 8601 or milliseconds) or an instant with a time zone."""
    if text is None:
        return None
    try:
        duration = parse_duration(text)
    except ValueError as exc:
        reason = str(exc)
    else:
        try:
            datetime.now(UTC) + duration
        except OverflowError:
            raise BadInput(f"--deadline {text!r}: the duration is too long") from None
        return duration
    try:
        instant = datetime.fromisoformat(text.strip())
    except ValueError:
        raise BadInput(
            f"--deadline: {reason}; or an instant with a time zone, such as '2026-01-01T09:00:00Z'"
        ) from None
    if instant.tzinfo is None:
        raise BadInput(
            f"--deadline {text!r}: an instant needs a time zone (such as 'Z' or '+01:00')"
        )
    return instant


def flows_to_run(
    file: Path,
    others: Sequence[Path],
    code: Code | None,
    excused: Callable[[Flow, Problem], bool] | None = None,
    hint: str = "name the module that implements a node with --nodes MODULE",
) -> list[Flow]:
    """The flow of ``file`` then those of ``others``, each checked against ``code`` (None: not
    checked against code: the workers have it); the problems of every file, and exit 2, when
    one of them cannot run. ``excused`` says which
    errors of a loaded flow do not stop it from running (``simulate``: a scripted placement
    needs no code); ``hint`` says what to do about a node no module implements."""
    loaded = load_files([file, *others], code)
    if any(item.flow is None for item in loaded):
        for item in loaded:
            print_problems(item.problems)
        bad = [display_path(item.path) for item in loaded if item.flow is None]
        what = "is not a valid flow" if len(bad) == 1 else "are not valid flows"
        raise BadInput(f"{', '.join(bad)} {what}; nothing run")
    errors = [
        p
        for item in loaded
        for p in item.errors
        if excused is None or item.flow is None or not excused(item.flow, p)
    ]
    if errors:
        print_problems(errors)
        count = len(errors)
        what = "reference does not resolve" if count == 1 else "references do not resolve"
        shown = f"; {hint}" if code is not None and code.unregistered else ""
        raise BadInput(f"cannot run {display_path(file)}: {count} {what}{shown}")
    return [item.flow for item in loaded if item.flow is not None]
