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

ISO_DURATION_PATTERN = (
    r"^P(?!$)(\d+(\.\d+)?W)?(\d+(\.\d+)?D)?"
    r"(T(?=\d)(\d+(\.\d+)?H)?(\d+(\.\d+)?M)?(\d+(\.\d+)?S)?)?$"
)


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


def _validate(value: Any) -> timedelta:
    return parse_duration(value)


Duration = Annotated[
    timedelta,
    BeforeValidator(_validate),
    PlainSerializer(format_duration, return_type=str, when_used="json-unless-none"),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "pattern": ISO_DURATION_PATTERN, "examples": ["PT10M", "P1D"]},
                {"type": "integer", "minimum": 0, "description": "milliseconds"},
            ],
            "description": "ISO 8601 duration (no years or months) or whole milliseconds",
        }
    ),
]
"""A duration field: accepts ISO 8601 text or milliseconds, dumps ISO 8601 text."""


def milliseconds(value: timedelta) -> int:
    return value // timedelta(milliseconds=1)
