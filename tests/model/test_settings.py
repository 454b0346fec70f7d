from datetime import timedelta

import pytest
from pydantic import ValidationError

from flowtide.model import (
    Backoff,
    NodeSettings,
    RetryPolicy,
    TimeoutAnchor,
    Timer,
    node_settings_schema,
)


def test_overlay_takes_only_the_fields_the_placement_sets() -> None:
    node = NodeSettings(timeout="PT1M", timeout_anchor="node", release_on=("paid",))
    placement = NodeSettings(timeout="PT10M")
    merged = node.overlay(placement)
    assert merged.timeout == timedelta(minutes=10)
    assert merged.timeout_anchor is TimeoutAnchor.NODE
    assert merged.release_on == ("paid",)


def test_overlay_with_nothing_is_unchanged() -> None:
    node = NodeSettings(timeout="PT1M")
    assert node.overlay(None) is node
    assert node.overlay(NodeSettings()) == node


def test_anchor_defaults_to_park() -> None:
    assert NodeSettings().anchor is TimeoutAnchor.PARK
    assert NodeSettings(timeout_anchor="instance").anchor is TimeoutAnchor.INSTANCE


@pytest.mark.parametrize("timeout", ["PT0S", 0, -5])
def test_timeout_must_be_positive(timeout: object) -> None:
    with pytest.raises(ValidationError, match="greater than zero"):
        NodeSettings.model_validate({"timeout": timeout})


def test_unknown_anchor_is_refused() -> None:
    with pytest.raises(ValidationError, match="'park', 'instance' or 'node'"):
        NodeSettings.model_validate({"timeout_anchor": "nod"})


def test_unknown_setting_is_refused() -> None:
    with pytest.raises(ValidationError, match="Extra inputs"):
        NodeSettings.model_validate({"timout": "PT1M"})


def test_timer_defaults() -> None:
    timer = Timer(after="PT1H", output="remind")
    assert timer.interrupting is False
    assert timer.anchor is TimeoutAnchor.PARK
    with pytest.raises(ValidationError):
        Timer(after="PT0S", output="remind")


def test_retry_policy_defaults_and_bounds() -> None:
    policy = RetryPolicy()
    assert policy.max_attempts == 3
    assert policy.backoff is Backoff.EXPONENTIAL
    with pytest.raises(ValidationError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValidationError, match="'max' must not be less than 'initial'"):
        RetryPolicy(initial="PT10S", max="PT1S")


def test_schema_describes_every_setting() -> None:
    schema = node_settings_schema()
    assert schema["$schema"].endswith("2020-12/schema")
    assert set(schema["properties"]) == {
        "timeout",
        "timeout_anchor",
        "release_on",
        "timers",
        "retry",
    }
    assert schema["additionalProperties"] is False
