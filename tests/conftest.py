"""Shared test setup: the Hypothesis settings profiles, the logging guard, and the fixtures
every folder shares (`sshd_server`, `s3_server`, `hub`, `cluster`, and `new_replica`
with its `codec` parameter).

Profiles (attrs' `tests/conftest.py` shape): "dev" by default, "ci" when `CI=true`;
`HYPOTHESIS_PROFILE` picks one explicitly.
"""

from __future__ import annotations

import compileall
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import memsync
from tests.helpers.crypto import ReplicaFactory, replica_factory
from tests.helpers.daemons import Cluster
from tests.helpers.s3server import S3Server, start_s3
from tests.helpers.sshd import SshdServer, start_sshd

# "ci" runs Hypothesis' own default of 100 examples, dev half of it (the fast lane);
# property tests that run merges, compactions or processes per example take a share of
# it (`tests.helpers.examples`), so that the suite stays within its 5 minutes on 2 cores
# (issue 19: measured at 295 s in a clean run with "ci" at 200, too close).
settings.register_profile(
    "ci",
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# No deadline in dev either: other jobs share these machines, and a per-example deadline
# would turn their load into flaky failures. Speed is watched by the suite's total time.
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "dev")
)


def pytest_configure(config: pytest.Config) -> None:
    """The suite keeps its state out of the developer's: commands run by tests without a
    state directory of their own (`memsync show` on a big file writes its persistent view)
    use a temporary one, not ~/.local/state/memsync. Each worker process gets its own.

    And the package's bytecode is compiled once, by the controlling process, as an
    installed package has it: with PYTHONDONTWRITEBYTECODE set (as on the project's
    machines), each of the suite's thousand-odd `python -m memsync` processes compiled
    every module it imports again, about 0.1 s each."""
    if not hasattr(config, "workerinput"):  # xdist's controller, or a run without xdist
        compileall.compile_dir(Path(memsync.__file__).parent, quiet=1)
    state = tempfile.mkdtemp(prefix="memsync-test-state-")
    os.environ["XDG_STATE_HOME"] = state
    config.add_cleanup(lambda: shutil.rmtree(state, ignore_errors=True))


SERVER_FIXTURES = frozenset({"sshd_server", "s3_server", "cluster"})
"""Fixtures that start real servers or daemons: a test using one is slow by nature."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `slow` what the fast lane (`-m "not slow"`) leaves to the full suite: every
    end-to-end test (tests/e2e) and every test that starts a real sshd, SeaweedFS or
    daemons (its fixtures, or the `integration` mark); the rest carry their own mark."""
    e2e = Path(__file__).parent / "e2e"
    off_linux = not sys.platform.startswith("linux")
    for item in items:
        if off_linux and item.get_closest_marker("linux_only"):
            item.add_marker(pytest.mark.skip(reason="needs Linux (/proc, RLIMIT_AS)"))
        names = set(getattr(item, "fixturenames", ()))
        servers = names & SERVER_FIXTURES or item.get_closest_marker("integration")
        if servers or e2e in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.slow)
    # The longest first, as a scheduler of jobs on a few machines does (longest
    # processing time first): the parallel workers (README `-n 4`; pyproject.toml hands
    # them 2 tests at a time) start the tests that declare a long timeout, then the other
    # slow ones, and fill in with the quick ones at the end, instead of one worker
    # finishing a long test alone (issue 19: the whole suite under 5 minutes on 2 cores).
    # A stable sort: each group keeps its order.
    items.sort(key=_longest_first)


def _longest_first(item: pytest.Item) -> tuple[float, bool]:
    timeout = item.get_closest_marker("timeout")
    declared = float(timeout.args[0]) if timeout and timeout.args else 0.0
    return -declared, item.get_closest_marker("slow") is None


@pytest.fixture(autouse=True)
def _restore_memsync_logger() -> Iterator[None]:
    """Put the "memsync" logger back as it was after each test.

    `memsync.cli.main` configures that logger (the application's right, STYLE guideline
    10); without this, a CLI test would leak its handler into every later test, and the
    guard in test_architecture.py could not tell the library from the CLI.
    """
    logger = logging.getLogger("memsync")
    handlers, level, propagate, disabled = (
        list(logger.handlers),
        logger.level,
        logger.propagate,
        logger.disabled,
    )
    yield
    logger.handlers[:] = handlers
    logger.setLevel(level)  # setLevel, not `.level =`: it also clears the level cache
    logger.propagate = propagate
    logger.disabled = disabled


# --- shared fixtures ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def sshd_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdServer]:
    """A real OpenSSH server on 127.0.0.1 for the whole session (built by `tests.helpers.sshd`;
    under CI=true `start_sshd` fails instead of skipping). The transport, sync and daemon
    tests share it; tests that restart a server start their own."""
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def hub(tmp_path: Path) -> Path:
    """An empty hub folder (a folder remote). The transport contract tests override it
    with their parametrized `Hub`."""
    root = tmp_path / "hub"
    root.mkdir()
    return root


@pytest.fixture
def codec(request: pytest.FixtureRequest) -> str:
    """The hub's codec for `new_replica`: "plain", unless the test is marked
    `tests.helpers.crypto.BOTH_CODECS` (then once "plain", once "encrypted")."""
    return str(getattr(request, "param", "plain"))


@pytest.fixture
def new_replica(codec: str) -> ReplicaFactory:
    """`make_replica`, or its encrypted twin when `codec` is "encrypted"."""
    return replica_factory(codec)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """Real daemons under `tmp_path` (`tests.helpers.daemons`), all killed at teardown."""
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


# One real SeaweedFS for the session (about a second to start); each test takes a fresh
# bucket with `s3_server.new_bucket()`. Under CI=true a missing server fails, never skips.
@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A real SeaweedFS S3 gateway on 127.0.0.1 for the whole session."""
    server = start_s3(tmp_path_factory.mktemp("s3"))
    yield server
    server.stop()
