"""How the demo writes time: how long after its run started, as a stopwatch shows it."""

from __future__ import annotations

from datetime import timedelta


def since(delta: timedelta, *, hours: bool = False) -> str:
    """``+m:ss`` (``+0:01.6`` with tenths when there are any), or ``+h:mm:ss`` from an hour on
    (or always, with ``hours``): ``+10:00`` is ten minutes after the run started."""
    tenths = round(delta.total_seconds() * 10)
    sign = "-" if tenths < 0 else "+"
    whole, tenth = divmod(abs(tenths), 10)
    minutes, seconds = divmod(whole, 60)
    text = f"{seconds:02}" + (f".{tenth}" if tenth else "")
    if hours or minutes >= 60:
        h, minutes = divmod(minutes, 60)
        return f"{sign}{h}:{minutes:02}:{text}"
    return f"{sign}{minutes}:{text}"
