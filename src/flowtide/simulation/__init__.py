"""Simulation: a script of signals and node outcomes played against a flow on a virtual clock.

A :class:`Script` says what the outside world does to one run, and when: signals at instants
since the start, and, for some placements, what their node does on each attempt (return an
output, park, raise, after a while of virtual time) in the place of its code.
:func:`play_script` plays it against an in-memory store and tells what happened as a
:class:`Timeline`: the run's events and the signals (accepted, or refused and why) in the order
they happened, the window of each placement that had one (its deadline, anchor, and where each
setting came from), and the result.
Hours of a flow play in milliseconds.

``flowtide simulate FILE --script SCRIPT`` prints a timeline.

:func:`whatif` plays a flow's recorded runs again with edited node settings and tells what would
have changed (``flowtide whatif``); :func:`register_edited` keeps the edited flow as a new
version.
"""

from flowtide.simulation.edits import register_edited
from flowtide.simulation.play import MAX_TIMERS, play_script, resolver
from flowtide.simulation.script import (
    DEFAULT_RUN_ID,
    DEFAULT_START,
    DEFAULT_UNTIL,
    NodeStep,
    ParkStep,
    Script,
    ScriptedSignal,
    check_script,
    load_script,
    parse_script,
)
from flowtide.simulation.scripted import ScriptedFailure, ScriptedNodes, ScriptUsedUp
from flowtide.simulation.timeline import Moment, Result, SignalSent, Timeline, Window
from flowtide.simulation.whatif import (
    DEFAULT_LAST,
    OutcomeChange,
    PlacementChange,
    Skipped,
    Unreproduced,
    WhatIfReport,
    whatif,
)
from flowtide.simulation.words import Narrator, anchor_words, compact_json

__all__ = [
    "DEFAULT_LAST",
    "DEFAULT_RUN_ID",
    "DEFAULT_START",
    "DEFAULT_UNTIL",
    "MAX_TIMERS",
    "Moment",
    "Narrator",
    "NodeStep",
    "OutcomeChange",
    "ParkStep",
    "PlacementChange",
    "Result",
    "Script",
    "ScriptUsedUp",
    "ScriptedFailure",
    "ScriptedNodes",
    "ScriptedSignal",
    "SignalSent",
    "Skipped",
    "Timeline",
    "Unreproduced",
    "WhatIfReport",
    "Window",
    "anchor_words",
    "check_script",
    "compact_json",
    "load_script",
    "parse_script",
    "play_script",
    "register_edited",
    "resolver",
    "whatif",
]
