"""Durations: ISO 8601 (``PT10M``, ``P1DT2H``, ``PT0.5S``) or a whole number of milliseconds.

Flowtide keeps a duration as a :class:`datetime.timedelta` and writes it back as the shortest ISO
8601 form. Years and months are refused: they have no fixed length, and a timeout must have one.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer, WithJsonSchema

_ISO = re.compile(
    r"^P(?!$)(?:(?P<weeks>\d+(?:\.\d+)?)W)?(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$"
)
_YEARS_OR_MONTHS = re.compile(r"^P(?:[^T]*[YM])")

DURATION_TEXT_PATTERN = (
    r"^\s*(\d+|[Pp](?!\s*$)(\d+(\.\d+)?[Ww])?(\d+(\.\d+)?[Dd])?"
    r"([Tt](?=\d)(\d+(\.\d+)?[Hh])?(\d+(\.\d+)?[Mm])?(\d+(\.\d+)?[Ss])?)?)\s*$"
)
"""Every text :func:`parse_duration` reads: ISO 8601 in either case, or digits (milliseconds),
with spaces around."""

_NOT_ZERO = r"^(?=[\s\S]*[1-9])"
"""Text with a digit other than 0: of the texts above, those that are longer than zero."""


def parse_duration(value: object) -> timedelta:
    """Read a duration from ISO 8601 text, whole milliseconds, or a ``timedelta``.

    Raises ``ValueError`` with a sentence that says what was wrong.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise ValueError("a duration must be ISO 8601 text (such as 'PT10M') or milliseconds")
    if isinstance(value, int):
        return _milliseconds(value, value)
    if isinstance(value, float) and value.is_integer():
        return _milliseconds(int(value), value)
    if not isinstance(value, str):
        raise ValueError("a duration must be ISO 8601 text (such as 'PT10M') or milliseconds")
    text = value.strip()
    if text.isdigit():
        return _milliseconds(int(text), value)
    upper = text.upper()
    match = _ISO.match(upper)
    if match is None:
        if _YEARS_OR_MONTHS.match(upper):
            raise ValueError(
                f"duration {value!r} uses years or months, which have no fixed length; "
                "use days, hours, minutes or seconds"
            )
        raise ValueError(
            f"{value!r} is not an ISO 8601 duration (examples: 'PT10M', 'PT1H30M', 'P1D', 'PT0.5S')"
        )
    parts = {k: float(v) for k, v in match.groupdict().items() if v is not None}
    try:
        return timedelta(**parts)
    except OverflowError:
        raise ValueError(f"duration {value!r} is too long") from None


def _milliseconds(count: int, value: object) -> timedelta:
    try:
        return timedelta(milliseconds=count)
    except OverflowError:
        raise ValueError(f"duration {value!r} is too long") from None


def format_duration(value: timedelta) -> str:
    """The shortest ISO 8601 text for ``value`` (``PT10M``, ``P1DT2H``, ``PT0.25S``, ``PT0S``)."""
    total_us = value // timedelta(microseconds=1)
    sign = "-" if total_us < 0 else ""
    total_us = abs(total_us)
    days, rem = divmod(total_us, 86_400_000_000)
    hours, rem = divmod(rem, 3_600_000_000)
    minutes, rem = divmod(rem, 60_000_000)
    seconds, micros = divmod(rem, 1_000_000)
    out = f"{sign}P"
    if days:
        out += f"{days}D"
    time = ""
    if hours:
        time += f"{hours}H"
    if minutes:
        time += f"{minutes}M"
    if seconds or micros:
        frac = f"{micros:06d}".rstrip("0")
        time += f"{seconds}.{frac}S" if frac else f"{seconds}S"
    if time:
        out += "T" + time
    if out in ("P", "-P"):
        out = "PT0S"
    return out


def _not_negative(value: Any) -> timedelta:
    parsed = parse_duration(value)
    if parsed < timedelta(0):
        shown = format_duration(value) if isinstance(value, timedelta) else repr(value)
        raise ValueError(f"duration {shown} is negative")
    return parsed


def duration_schema(*, positive: bool) -> dict[str, Any]:
    """The JSON Schema of a duration field: ISO 8601 text or whole milliseconds."""
    text: dict[str, Any] = {
        "type": "string",
        "pattern": _NOT_ZERO + DURATION_TEXT_PATTERN[1:] if positive else DURATION_TEXT_PATTERN,
        "examples": ["PT10M", "PT1H30M", "P1D", "PT0.5S"],
    }
    number = {"type": "integer", "minimum": 1 if positive else 0, "description": "milliseconds"}
    what = "longer than zero" if positive else "zero or more"
    return {
        "anyOf": [text, number],
        "description": f"A duration, {what}: ISO 8601 text (days, hours, minutes, seconds; "
        "no years or months) or whole milliseconds.",
    }


_WRITE = PlainSerializer(format_duration, return_type=str, when_used="json-unless-none")

Duration = Annotated[
    timedelta,
    BeforeValidator(_not_negative),
    _WRITE,
    WithJsonSchema(duration_schema(positive=False)),
]
"""A duration field: accepts ISO 8601 text or milliseconds (not negative), dumps ISO 8601 text."""

PositiveDuration = Annotated[
    timedelta,
    BeforeValidator(parse_duration),
    _WRITE,
    WithJsonSchema(duration_schema(positive=True)),
]
"""A duration field that must be longer than zero. The field's own validator refuses zero and
less, in words that name the field; this type says it in the JSON Schema."""


def milliseconds(value: timedelta) -> int:
    return value // timedelta(milliseconds=1)
