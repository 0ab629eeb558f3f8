"""The pure rules on replicas (rule 15): when one is silent, back, or came back."""

from __future__ import annotations

from memsync.core.watermarks import came_back, standing

DAY = 86_400 * 1_000_000
NOW = 1_000 * DAY
HORIZON = 90 * DAY


def test_a_replica_without_watermarks_is_silent() -> None:
    assert standing(None, now=NOW, horizon=HORIZON, retired=False) == "silent"


def test_silent_past_the_horizon_only() -> None:
    assert standing(NOW - HORIZON, now=NOW, horizon=HORIZON, retired=False) == "ok"
    assert standing(NOW - HORIZON - 1, now=NOW, horizon=HORIZON, retired=False) == "silent"


def test_a_retired_replica_is_back_when_its_watermarks_are_recent() -> None:
    assert standing(NOW - DAY, now=NOW, horizon=HORIZON, retired=True) == "back"
    assert standing(NOW - HORIZON, now=NOW, horizon=HORIZON, retired=True) == "ok"
    assert standing(None, now=NOW, horizon=HORIZON, retired=True) == "ok"


def test_came_back_after_a_silence_longer_than_the_horizon() -> None:
    long_ago = NOW - HORIZON - DAY
    assert came_back(long_ago, NOW, now=NOW, horizon=HORIZON)
    assert not came_back(long_ago, long_ago, now=NOW, horizon=HORIZON)  # nothing new
    assert not came_back(NOW - DAY, NOW, now=NOW, horizon=HORIZON)  # not silent long
    assert not came_back(None, NOW, now=NOW, horizon=HORIZON)
    assert not came_back(long_ago, None, now=NOW, horizon=HORIZON)
