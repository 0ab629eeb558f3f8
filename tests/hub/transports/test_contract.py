"""The one contract every transport keeps (STYLE guideline 4), run on each of them.

`memory` is the fake for sync tests, `localdir` a shared folder, `ssh` a real OpenSSH server
on 127.0.0.1 serving the same file system, so that a test can plant on disk what another
machine might have put in the hub (symlinks, odd names) and check modes and inodes; `s3` a
real SeaweedFS on 127.0.0.1, a fresh bucket per test (there a write inside a file must be
refused: segments are immutable).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memsync.errors import TransportError
from memsync.hub.transports import RemoteFile, Transport, open_transport, validate_name
from memsync.hub.transports.localdir import LocalDirTransport
from memsync.hub.transports.memory import InMemoryTransport
from tests.helpers.s3server import S3Server
from tests.helpers.sshd import SshdServer

FOLDER = "notes"
NAME = "laptop-1a2b.jsonl"


@dataclass
class Hub:
    """A transport under test, and a way around it to what it serves."""

    kind: str
    transport: Transport
    remove_root: Callable[[], None]
    plant: Callable[[str, str, bytes], None]  # write a file directly, bypassing the transport
    root: Path | None = None  # on disk, for the real transports


def _memory_hub() -> Hub:
    fake = InMemoryTransport()

    def remove_root() -> None:
        fake.root_present = False

    def plant(folder: str, name: str, data: bytes) -> None:
        fake.files[(folder, name)] = bytearray(data)
        fake.mtimes[(folder, name)] = 0.0

    return Hub("memory", fake, remove_root, plant)


def _disk_hub(kind: str, root: Path, transport: Transport) -> Hub:
    root.mkdir()

    def plant(folder: str, name: str, data: bytes) -> None:
        (root / folder).mkdir(exist_ok=True)
        (root / folder / name).write_bytes(data)

    return Hub(kind, transport, root.rmdir, plant, root)


def _s3_hub(server: S3Server) -> Hub:
    from memsync.hub.transports.s3 import S3Transport

    bucket = server.new_bucket()
    client = server.client()

    def remove_root() -> None:
        client.delete_bucket(Bucket=bucket)

    def plant(folder: str, name: str, data: bytes) -> None:
        key = f"hub/{folder}/{name}/{1:016d}/{0:020d}"
        client.put_object(Bucket=bucket, Key=key, Body=data)

    return Hub("s3", S3Transport(bucket, "hub", client=server.client()), remove_root, plant)


def _make_hub(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Hub:
    root = tmp_path / "hub"
    if kind == "memory":
        return _memory_hub()
    if kind == "s3":
        return _s3_hub(request.getfixturevalue("s3_server"))
    if kind == "localdir":
        return _disk_hub(kind, root, LocalDirTransport(root))
    server: SshdServer = request.getfixturevalue("sshd_server")
    from memsync.hub.transports.ssh import SSHTransport

    ssh = SSHTransport(
        server.host,
        str(root),
        port=server.port,
        user=server.user,
        identity_file=server.client_key,
        known_hosts=server.known_hosts,
        ssh_config_path=tmp_path / "no-ssh-config",
    )
    return _disk_hub(kind, root, ssh)


ALL = [
    "memory",
    "localdir",
    pytest.param("ssh", marks=pytest.mark.integration),
    pytest.param("s3", marks=pytest.mark.integration),
]
DISK = ["localdir", pytest.param("ssh", marks=pytest.mark.integration)]


@pytest.fixture(params=ALL)
def hub(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Hub]:
    made = _make_hub(request.param, request, tmp_path)
    yield made
    made.transport.close()


@pytest.fixture(params=DISK)
def disk_hub(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Hub]:
    made = _make_hub(request.param, request, tmp_path)
    yield made
    made.transport.close()


@pytest.fixture
def transport(hub: Hub) -> Transport:
    return hub.transport


def _lines(count: int, width: int = 100) -> bytes:
    return b"".join(b'{"id":"%08d","text":"%s"}\n' % (i, b"x" * width) for i in range(count))


# --- the hub root and folders ---------------------------------------------------------------


def test_missing_root_is_an_error_never_an_empty_memory(hub: Hub) -> None:
    hub.remove_root()
    t = hub.transport
    with pytest.raises(TransportError, match="hub folder missing"):
        t.list_files(FOLDER)
    with pytest.raises(TransportError, match="hub folder missing"):
        t.size(FOLDER, NAME)
    with pytest.raises(TransportError):
        t.write_at(FOLDER, NAME, 0, b"{}\n")
    if hub.root is not None:
        assert not hub.root.exists(), "a write must never create the hub root (unmounted share)"


def test_missing_folder_is_empty(transport: Transport) -> None:
    assert transport.list_files(FOLDER) == []
    assert transport.size(FOLDER, NAME) is None


def test_read_of_a_missing_file_is_an_error(transport: Transport) -> None:
    with pytest.raises(TransportError):
        transport.read(FOLDER, NAME, 0, 10)


# --- write_at -------------------------------------------------------------------------------


def test_write_at_zero_creates_folder_and_file(hub: Hub) -> None:
    t = hub.transport
    assert t.write_at(FOLDER, NAME, 0, b"one\n") == 4
    [listed] = t.list_files(FOLDER)
    assert (listed.name, listed.size) == (NAME, 4)
    assert t.size(FOLDER, NAME) == 4
    if hub.root is not None:
        assert stat.S_IMODE((hub.root / FOLDER / NAME).stat().st_mode) == 0o600
        assert stat.S_IMODE((hub.root / FOLDER).stat().st_mode) == 0o700


def test_write_at_the_end_appends_exactly(transport: Transport) -> None:
    assert transport.write_at(FOLDER, NAME, 0, b"a\n") == 2
    assert transport.write_at(FOLDER, NAME, 2, b"bb\n") == 5
    assert transport.write_at(FOLDER, NAME, 5, b"") == 5
    assert transport.write_at(FOLDER, NAME, 5, b"ccc\n") == 9
    assert transport.read(FOLDER, NAME, 0, 100) == b"a\nbb\nccc\n"


def test_write_at_inside_overwrites_at_that_offset(hub: Hub) -> None:
    """What the caller does to terminate a torn last line: write at the offset it chose.
    S3 refuses it: its segments are immutable, and a PUT is never torn."""
    transport = hub.transport
    transport.write_at(FOLDER, NAME, 0, b'{"a":1}\n{"b":')
    if hub.kind == "s3":
        with pytest.raises(TransportError, match="cannot write at 8, inside the file"):
            transport.write_at(FOLDER, NAME, 8, b'{"b":2}\n')
        assert transport.read(FOLDER, NAME, 0, 100) == b'{"a":1}\n{"b":'
        return
    assert transport.write_at(FOLDER, NAME, 8, b'{"b":2}\n') == 16
    assert transport.read(FOLDER, NAME, 0, 100) == b'{"a":1}\n{"b":2}\n'


def test_write_at_past_the_end_is_refused(transport: Transport) -> None:
    transport.write_at(FOLDER, NAME, 0, b"a\n")
    with pytest.raises(TransportError, match="cannot write at 3"):
        transport.write_at(FOLDER, NAME, 3, b"b\n")
    with pytest.raises(TransportError):
        transport.write_at(FOLDER, "other.jsonl", 5, b"b\n")  # missing, and not at 0
    assert transport.read(FOLDER, NAME, 0, 100) == b"a\n"
    assert transport.size(FOLDER, "other.jsonl") is None


def test_a_large_write_lands_byte_exact(transport: Transport) -> None:
    head = _lines(10)
    data = _lines(20_000)  # ~2.3 MB: many SFTP chunks
    transport.write_at(FOLDER, NAME, 0, head)
    assert transport.write_at(FOLDER, NAME, len(head), data) == len(head) + len(data)
    assert transport.read(FOLDER, NAME, 0, 10 * len(data)) == head + data
    assert transport.read(FOLDER, NAME, len(head) + 12_345, 100_000) == data[12_345:112_345]


# --- read and size --------------------------------------------------------------------------


def test_read_with_offset_and_limit(transport: Transport) -> None:
    transport.write_at(FOLDER, NAME, 0, b"0123456789")
    assert transport.read(FOLDER, NAME, 0, 4) == b"0123"
    assert transport.read(FOLDER, NAME, 3, 4) == b"3456"
    assert transport.read(FOLDER, NAME, 8, 100) == b"89"  # fewer at the end
    assert transport.read(FOLDER, NAME, 10, 100) == b""
    assert transport.read(FOLDER, NAME, 50, 100) == b""
    assert transport.read(FOLDER, NAME, 2, 0) == b""


# --- replace --------------------------------------------------------------------------------


def test_replace_swaps_the_whole_file_and_leaves_no_temp_file(hub: Hub) -> None:
    t = hub.transport
    t.write_at(FOLDER, NAME, 0, b"old\nlines\n")
    inode = (hub.root / FOLDER / NAME).stat().st_ino if hub.root else None
    t.replace(FOLDER, NAME, b"new\n")
    assert t.read(FOLDER, NAME, 0, 100) == b"new\n"
    assert [f.name for f in t.list_files(FOLDER)] == [NAME]
    if hub.root is not None:
        assert sorted(os.listdir(hub.root / FOLDER)) == [NAME]
        after = (hub.root / FOLDER / NAME).stat()
        assert after.st_ino != inode, "a rename over the file, not a rewrite in place"
        assert stat.S_IMODE(after.st_mode) == 0o600


def test_replace_removes_what_an_interrupted_replace_of_that_name_left(disk_hub: Hub) -> None:
    """Issue 13: a replace cut off between its temp file and its rename (a killed process,
    a dropped session) leaves `.<name>.tmp-<12 hex>`: the next replace of that name removes
    it, on a folder hub as over SFTP, and touches nothing else."""
    assert disk_hub.root is not None
    t = disk_hub.transport
    t.write_at(FOLDER, NAME, 0, b"old\n")
    others = [f".{NAME}.tmp-notours", f".other.jsonl.tmp-{'0' * 12}", f".{NAME}.tmp-{'a' * 13}"]
    for name in [f".{NAME}.tmp-0123456789ab", *others]:
        disk_hub.plant(FOLDER, name, b"half")
    t.replace(FOLDER, NAME, b"new\n")
    assert sorted(os.listdir(disk_hub.root / FOLDER)) == sorted([NAME, *others])


def test_replace_creates_a_missing_file(transport: Transport) -> None:
    transport.replace(FOLDER, "laptop-1a2b.watermarks.json", b'{"a": 1}')
    assert transport.size(FOLDER, "laptop-1a2b.watermarks.json") == 8


# --- names and symlinks: data from other machines ---------------------------------------------


BAD_NAMES = ["", ".", "..", "../x", "a/b", "/etc", "x" * 65, "sp ace", "uni\u00e9", "nul\x00"]


@pytest.mark.parametrize("bad", BAD_NAMES)
def test_invalid_name_arguments_are_refused(transport: Transport, bad: str) -> None:
    assert not validate_name(bad)
    calls: list[Callable[[], object]] = [
        lambda: transport.list_files(bad),
        lambda: transport.size(bad, NAME),
        lambda: transport.size(FOLDER, bad),
        lambda: transport.read(FOLDER, bad, 0, 10),
        lambda: transport.write_at(FOLDER, bad, 0, b"x\n"),
        lambda: transport.write_at(bad, NAME, 0, b"x\n"),
        lambda: transport.replace(FOLDER, bad, b"x\n"),
    ]
    for call in calls:
        with pytest.raises(TransportError, match="invalid name"):
            call()


def test_valid_names() -> None:
    assert validate_name("laptop-1a2b.jsonl")
    assert validate_name("x" * 64)
    assert validate_name(".hidden")
    assert validate_name("a..b")


def test_files_with_invalid_names_are_skipped(hub: Hub) -> None:
    hub.plant(FOLDER, "ok.jsonl", b"{}\n")
    hub.plant(FOLDER, "sp ace.jsonl", b"{}\n")
    hub.plant(FOLDER, "y" * 65, b"{}\n")
    hub.plant(FOLDER, "caf\u00e9.jsonl", b"{}\n")
    assert [f.name for f in hub.transport.list_files(FOLDER)] == ["ok.jsonl"]


def test_symlinks_are_skipped_and_refused(disk_hub: Hub, tmp_path: Path) -> None:
    assert disk_hub.root is not None
    t = disk_hub.transport
    secret = tmp_path / "secret.txt"
    secret.write_bytes(b"not for the hub\n")
    t.write_at(FOLDER, NAME, 0, b"{}\n")
    folder = disk_hub.root / FOLDER
    (folder / "link.jsonl").symlink_to(secret)
    (folder / "dangling.jsonl").symlink_to(tmp_path / "nowhere")
    (folder / "sub").mkdir()
    assert t.list_files(FOLDER) == [RemoteFile(NAME, 3, t.list_files(FOLDER)[0].mtime)]
    with pytest.raises(TransportError, match="symlink"):
        t.read(FOLDER, "link.jsonl", 0, 100)
    with pytest.raises(TransportError):
        t.write_at(FOLDER, "link.jsonl", 0, b"x\n")
    with pytest.raises(TransportError):
        t.size(FOLDER, "sub")
    assert secret.read_bytes() == b"not for the hub\n"


def test_a_symlinked_memory_folder_is_not_followed(disk_hub: Hub, tmp_path: Path) -> None:
    assert disk_hub.root is not None
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "passwd").write_bytes(b"root:x:0:0\n")
    (disk_hub.root / FOLDER).symlink_to(elsewhere)
    t = disk_hub.transport
    with pytest.raises(TransportError, match="not a directory"):
        t.list_files(FOLDER)
    with pytest.raises(TransportError):
        t.write_at(FOLDER, NAME, 0, b"{}\n")
    assert sorted(os.listdir(elsewhere)) == ["passwd"]


# --- the fake's failure hooks -----------------------------------------------------------------


def test_memory_fake_failure_injection() -> None:
    fake = InMemoryTransport()
    fake.fail_next = TransportError("hub: connection dropped")
    with pytest.raises(TransportError, match="dropped"):
        fake.list_files(FOLDER)
    assert fake.list_files(FOLDER) == []  # one failure, then back to normal
    fake.write_at(FOLDER, NAME, 0, b"a\n")
    fake.tear_next_write = 3
    with pytest.raises(TransportError):
        fake.write_at(FOLDER, NAME, 2, b"bbbb\ncc\n")
    assert fake.read(FOLDER, NAME, 0, 100) == b"a\nbbb"  # a prefix landed: unknown outcome
    assert fake.calls == 5


# --- the factory ------------------------------------------------------------------------------


def test_open_transport(tmp_path: Path) -> None:
    local = open_transport("file", str(tmp_path))
    assert isinstance(local, LocalDirTransport)
    with pytest.raises(TransportError, match="no host"):
        open_transport("ssh", "/srv/memsync")
    with pytest.raises(TransportError, match="unknown remote scheme"):
        open_transport("ftp", "/srv/memsync")
    with pytest.raises(TransportError, match="no bucket"):
        open_transport("s3", "prefix")
    s3 = open_transport("s3", "hub", host="bucket", endpoint_url="http://127.0.0.1:1")
    assert repr(s3) == "S3Transport('s3://bucket/hub')"


def test_importing_transports_does_not_import_paramiko() -> None:
    code = "import sys, memsync.hub.transports; sys.exit('paramiko' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0


def test_importing_memsync_does_not_import_boto3() -> None:
    """boto3 is imported only when an s3:// remote is used, not by the CLI or the library."""
    code = (
        "import sys, memsync, memsync.cli, memsync.hub.sync, memsync.hub.transports; "
        "sys.exit('boto3' in sys.modules or 'botocore' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
