"""What the engine keeps of an error: redacted by the user's hook, then cut to size.

A node's exception can carry secrets (an API key in a URL, a password in a connection string)
and be of any size. Before an error is recorded anywhere (a run's result, its history, a
scatter item's record), its message, traceback and the text in its details go through the
redaction hook, ``Engine(redact=...)`` or, for engines given none, the one registered for the
process with :func:`redact_errors`: a function taking text and returning it with the secrets
replaced. Then they are cut to size (:data:`MAX_MESSAGE`, :data:`MAX_TRACEBACK`,
:data:`MAX_DETAILS`). A hook that raises, or returns anything but text, has the text withheld
rather than kept as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "MAX_DETAILS",
    "MAX_MESSAGE",
    "MAX_TRACEBACK",
    "Redact",
    "bound_message",
    "bound_traceback",
    "clean_details",
    "redact_errors",
    "redacted",
    "registered",
]

Redact = Callable[[str], str]
"""A redaction hook: text in, the same text with its secrets replaced out."""

MAX_MESSAGE = 4_000
"""The most characters of an error's message kept (its start, and how many were cut)."""
MAX_TRACEBACK = 16_000
"""The most characters of a traceback kept: its first :data:`TRACEBACK_HEAD` (where it began)
and its last ones (the innermost frames and the exception itself)."""
TRACEBACK_HEAD = 4_000
MAX_DETAILS = 8_000
"""The most bytes an error's details may take as JSON; larger details are replaced by a note."""

_registered: list[Redact] = []


def redact_errors(redact: Redact | None) -> None:
    """Register ``redact`` as the redaction hook of every engine of this process that is given
    none (None: no hook). A module passed to ``flowtide worker --nodes`` can call it when it
    is imported."""
    _registered[:] = [redact] if redact is not None else []


def registered() -> Redact | None:
    """The redaction hook registered for the process, if any."""
    return _registered[0] if _registered else None


def redacted(text: str, redact: Redact | None) -> str:
    """``text`` through ``redact`` (the process's registered hook when None)."""
    hook = redact if redact is not None else registered()
    if hook is None:
        return text
    try:
        out = hook(text)
    except Exception as exc:
        return f"(withheld: the redaction hook raised {type(exc).__name__})"
    if not isinstance(out, str):
        return f"(withheld: the redaction hook returned {type(out).__name__}, not text)"
    return out


def bound_message(text: str) -> str:
    """``text`` cut to :data:`MAX_MESSAGE` characters, saying how many more there were."""
    if len(text) <= MAX_MESSAGE:
        return text
    return f"{text[:MAX_MESSAGE]}... ({len(text) - MAX_MESSAGE:,} more characters)"


def bound_traceback(text: str) -> str:
    """``text`` cut to about :data:`MAX_TRACEBACK` characters: its start and its end kept."""
    if len(text) <= MAX_TRACEBACK:
        return text
    tail = MAX_TRACEBACK - TRACEBACK_HEAD
    cut = len(text) - MAX_TRACEBACK
    return f"{text[:TRACEBACK_HEAD]}\n... ({cut:,} characters cut) ...\n{text[-tail:]}"


def clean_details(details: Mapping[str, Any], redact: Redact | None) -> dict[str, Any]:
    """``details`` (JSON values) with every text in them redacted, or a note in their place
    when they take more than :data:`MAX_DETAILS` bytes as JSON."""
    out = {str(k): _redact_value(v, redact) for k, v in details.items()}
    size = len(json.dumps(out, ensure_ascii=False).encode("utf-8"))
    if size > MAX_DETAILS:
        return {"omitted": f"the details took {size:,} bytes as JSON, over {MAX_DETAILS:,}"}
    return out


def _redact_value(value: Any, redact: Redact | None) -> Any:
    if isinstance(value, str):
        return bound_message(redacted(value, redact))
    if isinstance(value, Mapping):
        return {k: _redact_value(v, redact) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_value(v, redact) for v in value]
    return value
