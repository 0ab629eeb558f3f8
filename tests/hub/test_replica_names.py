"""A replica id made from the host name is one Windows can hold as a hub file name
(issue 23): `aux.local` would make `aux.local-1a2b3c.jsonl`, a device name there."""

from __future__ import annotations

import pytest

from memsync.core.names import valid_replica, windows_problem
from memsync.hub.state import _hostname_id


@pytest.mark.parametrize("host", ["aux.local", "CON", "nul.lan", "laptop", "Mac-Book.local", ""])
def test_a_replica_id_made_from_the_host_name_is_one_windows_can_hold(host: str) -> None:
    made = _hostname_id(host)
    assert valid_replica(made)
    assert windows_problem(made) is None
    if host == "laptop":
        assert made.startswith("laptop-")
