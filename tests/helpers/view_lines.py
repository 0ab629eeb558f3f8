"""Random lines for the tests of the view store's quick part (`memsync.local.viewranks`):
seeded, so a failing case can be run again, and built to make its hard cases common."""

from __future__ import annotations

import json
import random

from memsync.core.timestamps import MS, SECOND, format_ts
from tests.helpers.strategies import T0

__all__ = ["IDS", "MINUTE", "SCOPES", "entries"]

MINUTE = 60 * SECOND
IDS = [f"id{n:04d}" for n in range(60)]
SCOPES = ("global", "github.com", "api.github.com", "project:x")


def entries(seed: int, n: int) -> list[bytes]:
    """`n` random lines over 60 ids: entries of each kind, scope, class and confidence
    (ties too), some long (over `LONG_LINE`, some too long for a small block), expiring
    around `NOW`, tombstones and supersessions, on a grid of instants (ties too)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        rid = rng.choice(IDS)
        created = format_ts(T0 + rng.randint(0, 10) * MINUTE + rng.choice([0, 250]) * MS)
        if rng.random() < 0.1:
            out.append(json.dumps({"id": rid, "deleted": True, "created_at": created}))
            continue
        obj = {
            "id": rid,
            "kind": rng.choice(["fact", "lesson", "preference", "avoid", "source"]),
            "text": "w" * rng.choice([1, 5, 30, 30, 30, 30, 400, 700, 1500, 3000]),
            "scope": rng.choice(SCOPES),
            "confidence": rng.choice([0.1, 0.5, 0.5, 0.9, 1, 0.0]),
            "created_at": created,
        }
        if rng.random() < 0.3:
            obj["source"] = "user"
        if rng.random() < 0.2:
            obj["expires_at"] = format_ts(T0 + rng.randint(0, 12) * MINUTE)
        if rng.random() < 0.08:
            obj["supersedes"] = rng.choice(IDS)
        out.append(json.dumps(obj))
    return [line.encode() for line in out]
