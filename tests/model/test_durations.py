from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from flowtide.model import format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("PT10M", timedelta(minutes=10)),
        ("PT1H30M", timedelta(hours=1, minutes=30)),
        ("P1D", timedelta(days=1)),
        ("P1W", timedelta(weeks=1)),
        ("P1DT2H3M4S", timedelta(days=1, hours=2, minutes=3, seconds=4)),
        ("PT0.5S", timedelta(milliseconds=500)),
        ("pt10m", timedelta(minutes=10)),
        ("1500", timedelta(milliseconds=1500)),
    ],
)
def test_parses_iso_8601_text(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


def test_integers_are_milliseconds() -> None:
    assert parse_duration(600_000) == timedelta(minutes=10)
    assert parse_duration(250.0) == timedelta(milliseconds=250)


@pytest.mark.parametrize("text", ["P", "PT", "10M", "PT10", "P1H", "PTM", "xPT1M", "PT1M1H", ""])
def test_rejects_malformed_text(text: str) -> None:
    with pytest.raises(ValueError, match="not an ISO 8601 duration"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["P1Y", "P2M", "P1Y2M3D"])
def test_rejects_years_and_months_with_a_reason(text: str) -> None:
    with pytest.raises(ValueError, match="years or months"):
        parse_duration(text)


@pytest.mark.parametrize("value", [True, None, [1], {"a": 1}, 1.5])
def test_rejects_other_types(value: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (timedelta(minutes=10), "PT10M"),
        (timedelta(days=1, hours=2), "P1DT2H"),
        (timedelta(milliseconds=250), "PT0.25S"),
        (timedelta(0), "PT0S"),
        (timedelta(seconds=-5), "-PT5S"),
    ],
)
def test_formats_shortest_form(value: timedelta, text: str) -> None:
    assert format_duration(value) == text


@given(st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=10_000)))
def test_format_then_parse_is_identity(value: timedelta) -> None:
    assert parse_duration(format_duration(value)) == value
