"""How many examples a property test runs: a share of the loaded Hypothesis profile
(tests/conftest.py: "dev" 50, "ci" 100), so that one knob sets every test's effort."""

from __future__ import annotations

from hypothesis import settings

__all__ = ["examples"]


def examples(share: float) -> int:
    """`share` of the current profile's `max_examples` (at least 10): tests whose example
    runs real merges, compactions or processes take a smaller share than pure ones."""
    return max(10, round(settings().max_examples * share))
