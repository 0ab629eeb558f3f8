"""Fixtures for the transport tests: one sshd per session, built from `tests.sshd`."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sshd import SshdServer, start_sshd


@pytest.fixture(scope="session")
def sshd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdServer]:
    """A real OpenSSH server on 127.0.0.1, shared by the tests that do not restart it."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()
