"""A hub holding receipts (issue 21) still syncs with the previous release of memsync, which
knows nothing of them: it neither reads them as records nor stops at them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.crypto import BOTH_CODECS, ReplicaFactory
from tests.helpers.receipts import receipt_path, replica_on, standings
from tests.helpers.s3server import ACCESS_KEY, SECRET_KEY, S3Server
from tests.helpers.sync import Replica, assert_converged

PREVIOUS_RELEASE = "12b32d4"
"""The last commit of main before receipts: the memsync a user upgrading from runs."""

_REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def previous_release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous release's source tree (run with PYTHONPATH pointing at it, same deps)."""
    if subprocess.run(
        ["git", "-C", str(_REPO), "cat-file", "-e", f"{PREVIOUS_RELEASE}^{{commit}}"],
        capture_output=True,
        check=False,
    ).returncode:
        pytest.skip(f"commit {PREVIOUS_RELEASE} is not in this checkout's history")
    root = tmp_path_factory.mktemp("previous-release")
    archive = subprocess.run(
        ["git", "-C", str(_REPO), "archive", PREVIOUS_RELEASE, "memsync"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(root)], input=archive, check=True)
    return root


def _old_memsync(release: Path, replica: Replica, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(release)}
    return subprocess.run(
        [sys.executable, "-m", "memsync", *args, "--config", str(replica.config)],
        capture_output=True,
        check=False,
        text=True,
        env=env,
        cwd=release,
        timeout=120,
    )


@pytest.mark.slow
@BOTH_CODECS
def test_the_previous_release_syncs_through_a_hub_holding_receipts(
    tmp_path: Path, hub: Path, new_replica: ReplicaFactory, previous_release: Path
) -> None:
    which = _old_memsync(previous_release, new_replica(tmp_path, "probe", str(hub)), "--help")
    assert which.returncode == 0, which.stderr
    probe = subprocess.run(
        [sys.executable, "-c", "import memsync.hub.receipts"],
        env={**os.environ, "PYTHONPATH": str(previous_release)},
        cwd=previous_release,
        capture_output=True,
        check=False,
    )
    assert probe.returncode != 0  # the old tree is the one imported: it has no receipts

    new, old = new_replica(tmp_path, "new", str(hub)), new_replica(tmp_path, "old", str(hub))
    new.memory().add("fact", "The staging bucket is eu-west-1.")
    new.sync()
    assert receipt_path(hub, new).exists()
    old.memory().add("lesson", "Retry after a rate limit, never before.")
    result = _old_memsync(previous_release, old, "sync", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    (report,) = json.loads(result.stdout)
    assert report["error"] is None
    assert report["bad"] == []
    assert report["skipped"] == []
    assert report["pulled_records"] == 1
    assert report["pushed_records"] == 1
    new.memory().add("fact", "Tests are flaky on Mondays.")
    new.sync()  # a second receipt, replaced in place
    result = _old_memsync(previous_release, old, "sync", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    (report,) = json.loads(result.stdout)
    assert report["error"] is None
    assert report["bad"] == []
    assert report["pulled_records"] == 1
    new.sync()
    assert_converged([new, old])
    assert len(new.view()) == 3


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_the_previous_release_syncs_through_an_s3_hub_holding_receipts(
    tmp_path: Path,
    hub: Path,
    s3_server: S3Server,
    previous_release: Path,
    monkeypatch: pytest.MonkeyPatch,
    encrypted: bool,
) -> None:
    """On S3 a receipt is objects of its own generations (`<replica>.receipt.json/<gen>/0`):
    the previous release lists them as a file and leaves it alone."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    s3 = (s3_server, s3_server.new_bucket())
    new, old = (
        replica_on("s3", tmp_path, name, hub=hub, encrypted=encrypted, s3=s3)
        for name in ("new", "old")
    )
    new.memory().add("fact", "The staging bucket is eu-west-1.")
    new.sync()
    old.memory().add("lesson", "Retry after a rate limit, never before.")
    for _ in range(2):
        result = _old_memsync(previous_release, old, "sync", "--json")
        assert result.returncode == 0, result.stdout + result.stderr
        (report,) = json.loads(result.stdout)
        assert report["error"] is None
        assert report["bad"] == []
        assert report["skipped"] == []
        new.sync()
    assert_converged([new, old])
    assert len(old.view()) == 2
    assert standings(new) == {"new": "this machine", "old": "no receipt"}
