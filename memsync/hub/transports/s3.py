"""A hub on S3-compatible object storage (AWS S3, Ceph RGW, SeaweedFS, MinIO): issue 11.

Each hub file is a set of immutable *segment* objects, so that the object listing is the file:

    <prefix>/<folder>/<name>/<generation>/<offset>

`generation` is 16 decimal digits (a microsecond time, strictly increasing per file) and
`offset` 20; the current generation of a file is its highest one, and its segments must
tile it: the first at offset 0, each next one where the previous ends. Then:

- `list_files` and `size` come from one LIST of the folder, cached for the pass (the cache
  is reused for at most `listing_max_age` seconds, and kept up to date by our own writes);
- `read` is one ranged GET per segment it touches: a pass reads only segments past its offset;
- `write_at(offset == size)` is one PUT of a new segment with `If-None-Match: *`, so that a
  retry after a lost reply gets 412, and is a success when the object holds our bytes;
  writing inside a file (`offset < size`) is refused: segments are immutable;
- `replace` PUTs the whole content as one segment of a new generation and then deletes the
  older generations: readers pick the highest, and one holding the old generation notices
  (its size, `mtime` and `RemoteFile.generation` change), as with the folder hub.

A store that ignores or refuses conditional PUTs is detected once per folder (a probe key
written twice) and remembered in a marker object, `<prefix>/<folder>/.mode/<mode>`, which
the folder's LIST shows for free; then plain PUTs are used, which is safe while each replica
prefix has one writer (DESIGN.md "The hub"). `S3Transport.mode` says which.

Everything read from the store is untrusted: names are checked with `validate_name`, keys
that do not parse are ignored, sizes and offsets must agree, and a segment that does not tile
its file, is shorter than listed, or fails its checksum (metadata `xxh3`) is reported as an
`UnreadableHubFile` naming it, never read as data: sync skips that peer's file and reports
it, and the rest of the memory syncs (issue 24, item 8).

boto3 is imported here only, and this module only when an `s3://` remote is opened, so that
`import memsync` stays light. Credentials come from boto3's standard chain (environment,
shared credentials file, profile, instance role); never from memsync's config.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Literal

import xxhash

from memsync.errors import MemsyncError, TransportError, TransportTimeout, UnreadableHubFile
from memsync.hub.transports._s3_errors import (
    _DENIED,
    _NO_CONDITIONAL,
    _PRECONDITION,
    _code,
    _one_line,
    no_retry_after_timeout,
)
from memsync.hub.transports._s3_layout import (
    _MODE_DIR,
    _File,
    _Listing,
    _new_generation,
    _parse,
    _Segment,
)
from memsync.hub.transports._s3_session import new_session
from memsync.hub.transports.base import RemoteFile, check_name

if TYPE_CHECKING:
    from memsync.hub.transports.base import Transport

__all__ = ["MAX_LIST_PAGES", "MERGE_SEGMENTS", "PUSH_CHUNK_BYTES", "Mode", "S3Transport"]

Mode = Literal["conditional", "plain"]
"""How segments are written: `If-None-Match: *` PUTs, or plain PUTs (one writer per prefix)."""

MAX_LIST_PAGES = 1000
"""A folder listing longer than this many pages (1000 keys each) is refused: untrusted input."""

PUSH_CHUNK_BYTES = 16 << 20
"""What sync writes at once to an S3 hub (`memsync.hub.sync` asks): each write is one object,
so a first push of 1,000,000 records (about 260 MB) makes about 17 objects, not 1,000."""

MERGE_SEGMENTS = 16
"""Our own hub file with more segments than this is rewritten as one by its compaction."""

_CHECKSUM = "xxh3"  # user metadata: xxh3_64 hex of the segment, checked on whole-segment GETs


class S3Transport:
    """The `Transport` for `s3://bucket/prefix` (see the module docstring for the layout).

    Args:
        bucket: the bucket; it must exist (a missing bucket is an error, never an empty hub).
        prefix: the hub's key prefix inside the bucket ("" for the bucket root).
        endpoint_url: for stores other than AWS (`http://127.0.0.1:8333`); None for AWS.
        region: the signing region; None lets boto3 decide (environment, profile).
        profile: a profile of `~/.aws/config` and `~/.aws/credentials`; None: the default chain.
        client: a ready boto3 S3 client (tests, benchmarks); built lazily otherwise.
        listing_max_age: seconds a folder listing is reused by `size`, `read` and `write_at`.
        attempts: total attempts per request (botocore's standard retry mode); a request
            that timed out is not tried again (the endpoint or the network hangs).
        timeout: how long one request waits for any answer (botocore's read timeout), in
            seconds; connecting gets as long, at most 10 s. So a frozen endpoint fails a
            pass within about `timeout` seconds (issue 24, item 11: it took 81 s).
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region: str | None = None,
        profile: str | None = None,
        client: Any = None,
        listing_max_age: float = 5.0,
        attempts: int = 3,
        timeout: float = 30.0,
    ) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url, self.region, self.profile = endpoint_url, region, profile
        self.listing_max_age = listing_max_age
        self.attempts, self.timeout = attempts, timeout
        self._client = client
        self._listings: dict[str, _Listing] = {}
        self.push_chunk_bytes = PUSH_CHUNK_BYTES
        self.mode: Mode | None = None
        """How the last write was made; None until this transport has written."""

    def __repr__(self) -> str:
        return f"S3Transport({self.url!r})"

    @property
    def url(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"

    # --- plumbing ---------------------------------------------------------------------

    @property
    def client(self) -> Any:
        """The boto3 client, made on first use (boto3 is imported only then)."""
        if self._client is None:
            self._client = self._new_client()
            # A timed-out request is not retried: three tries of a frozen endpoint took 81 s.
            self._client.meta.events.register_first("needs-retry.s3", no_retry_after_timeout)
        return self._client

    def _new_client(self) -> Any:
        with self._errors(self.url):
            from botocore.config import Config

            session = new_session(self.profile)
            return session.client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=self.region,
                config=Config(
                    retries={"max_attempts": self.attempts, "mode": "standard"},
                    connect_timeout=min(10.0, self.timeout),
                    read_timeout=self.timeout,
                    # Compatible stores (older MinIO, Ceph, SeaweedFS) do not all accept
                    # the CRC trailers newer botocore sends by default.
                    request_checksum_calculation="when_required",
                    response_checksum_validation="when_required",
                ),
            )

    def _folder_prefix(self, folder: str) -> str:
        return f"{self.prefix}/{folder}/" if self.prefix else f"{folder}/"

    def _key(self, folder: str, name: str, generation: str, offset: int) -> str:
        return f"{self._folder_prefix(folder)}{name}/{generation}/{offset:020d}"

    def _where(self, *parts: str) -> str:
        return "/".join([self.url, *parts])

    @contextmanager
    def _errors(self, where: str) -> Iterator[None]:
        """Translate botocore's exceptions into one-line `TransportError`s naming `where`."""
        try:
            yield
        except MemsyncError:
            raise
        except Exception as exc:
            translated = self._translate(where, exc)
            if translated is None:
                raise
            raise translated from exc

    def _translate(self, where: str, exc: Exception) -> TransportError | None:
        module = type(exc).__module__
        if not (module.startswith(("botocore", "boto3", "urllib3"))):
            return None
        name = type(exc).__name__
        code = _code(exc)
        if code == "NoSuchBucket":
            return TransportError(
                f"hub folder missing or unreadable: {self.url} (no such bucket {self.bucket!r})"
            )
        if code in _DENIED:
            return TransportError(
                f"{where}: access denied ({code}): check the credentials (AWS_ACCESS_KEY_ID, "
                "AWS_PROFILE, ~/.aws/credentials or the remote's profile) and their rights"
            )
        if name in ("NoCredentialsError", "PartialCredentialsError"):
            return TransportError(
                f"{where}: no S3 credentials found: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, a profile, or ~/.aws/credentials"
            )
        if name == "ReadTimeoutError":
            return TransportTimeout(
                f"{where}: no answer within {self.timeout:g} s (the server or the network hangs)"
            )
        if name == "ConnectTimeoutError":
            return TransportTimeout(
                f"{where}: no connection within {min(10.0, self.timeout):g} s (the server or "
                "the network hangs)"
            )
        # The rest (unreachable endpoint, unknown profile, other error codes) in botocore's
        # own words, on one line.
        return TransportError(f"{where}: {_one_line(exc)}")

    # --- the listing ------------------------------------------------------------------

    def _list(self, folder: str) -> _Listing:
        """LIST the folder (paginated: one request up to 1000 objects) and parse it."""
        base = self._folder_prefix(folder)
        objects: list[tuple[str, int]] = []
        token: str | None = None
        with self._errors(self._where(folder)):
            for _ in range(MAX_LIST_PAGES):
                args: dict[str, Any] = {"Bucket": self.bucket, "Prefix": base}
                if token:
                    args["ContinuationToken"] = token
                page = self.client.list_objects_v2(**args)
                for obj in page.get("Contents", []):
                    key, size = obj.get("Key"), obj.get("Size")
                    if isinstance(key, str) and type(size) is int and size >= 0:
                        objects.append((key, size))
                token = page.get("NextContinuationToken")
                if not page.get("IsTruncated") or not token:
                    break
            else:
                raise TransportError(
                    f"{self._where(folder)}: more than {MAX_LIST_PAGES * 1000} objects; "
                    "refusing to list further (compact the hub files)"
                )
        listing = _parse(self._where(folder), base, objects)
        self._listings[folder] = listing
        return listing

    def _listing(self, folder: str) -> _Listing:
        """The folder's listing: the cached one while fresh, else a new LIST."""
        cached = self._listings.get(folder)
        if cached is not None and time.monotonic() - cached.at <= self.listing_max_age:
            return cached
        return self._list(folder)

    def _file(self, folder: str, name: str) -> _File | None:
        f = self._listing(folder).files.get(name)
        if f is not None and f.problem is not None:
            raise UnreadableHubFile(f.problem)
        return f

    # --- the protocol -----------------------------------------------------------------

    def list_files(self, folder: str) -> list[RemoteFile]:
        """One LIST. A file whose segments do not tile is listed (so that reading it reports
        the problem); `mtime` is its generation's time, `generation` its generation."""
        check_name(self.url, folder)
        listing = self._list(folder)
        if listing.modes:  # the folder's marker says it, at no cost
            self.mode = "plain" if "plain" in listing.modes else "conditional"
        return [
            RemoteFile(f.name, f.size, int(f.generation) / 1e6, f.generation)
            for f in sorted(listing.files.values(), key=lambda f: f.name)
        ]

    def size(self, folder: str, name: str) -> int | None:
        check_name(self.url, folder, name)
        f = self._file(folder, name)
        return None if f is None else f.size

    def read(self, folder: str, name: str, offset: int, limit: int) -> bytes:
        """Ranged GETs of the segments overlapping `[offset, offset + limit)`.

        If a segment vanished since the listing (its file was replaced meanwhile), a read
        from offset 0 starts again on the new generation; any other read raises, and the
        next pass reads the file as its new generation says.
        """
        check_name(self.url, folder, name)
        where = self._where(folder, name)
        f = self._file(folder, name)
        if f is None:
            raise TransportError(f"{where}: No such file or directory")
        try:
            return self._read(f, offset, limit)
        except _Vanished:
            self._listings.pop(folder, None)
            if offset != 0:
                raise TransportError(
                    f"{where}: rewritten while being read; it is read again next pass"
                ) from None
            f = self._file(folder, name)
            if f is None:
                raise TransportError(f"{where}: No such file or directory") from None
            try:
                return self._read(f, offset, limit)
            except _Vanished:
                raise TransportError(f"{where}: rewritten while being read") from None

    def _read(self, f: _File, offset: int, limit: int) -> bytes:
        end = min(f.size, offset + max(limit, 0))
        chunks: list[bytes] = []
        for seg in f.segments:
            first = max(offset, seg.offset) - seg.offset
            last = min(end, seg.offset + seg.size) - seg.offset  # exclusive
            if first >= last:
                continue  # outside the range asked for
            chunks.append(self._get(seg, first, last))
        return b"".join(chunks)

    def _get(self, seg: _Segment, first: int, last: int) -> bytes:
        where = f"s3://{self.bucket}/{seg.key}"
        whole = first == 0 and last == seg.size
        args: dict[str, Any] = {"Bucket": self.bucket, "Key": seg.key}
        if not whole:
            args["Range"] = f"bytes={first}-{last - 1}"
        try:
            with self._errors(where):
                reply = self.client.get_object(**args)
                body = reply["Body"]
                try:
                    data: bytes = body.read(last - first + 1)  # one more: catch a longer object
                finally:
                    body.close()
        except TransportError as exc:
            if _code(exc.__cause__) in ("NoSuchKey", "404"):
                raise _Vanished from exc
            if _code(exc.__cause__) in ("InvalidRange", "416"):
                raise UnreadableHubFile(
                    f"{where}: shorter than listed (truncated by hand?); not read"
                ) from exc
            raise
        if len(data) != last - first or (whole and reply.get("ContentLength") != seg.size):
            raise UnreadableHubFile(
                f"{where}: {len(data)} bytes where the listing says {last - first} "
                "(changed by hand?); not read"
            )
        expected = (reply.get("Metadata") or {}).get(_CHECKSUM)
        if whole and expected is not None and xxhash.xxh3_64_hexdigest(data) != expected:
            raise UnreadableHubFile(
                f"{where}: its bytes do not match their checksum (corrupted?); not read"
            )
        return data

    def write_at(self, folder: str, name: str, offset: int, data: bytes) -> int:
        """One PUT of a new segment at `offset == size`; see the module docstring.

        Refused: a negative offset, an offset past the end, an offset inside the file
        (segments are immutable: a torn line cannot exist here, so sync never needs it),
        and an offset other than 0 for a missing file. An empty `data` writes nothing.
        """
        check_name(self.url, folder, name)
        where = self._where(folder, name)
        if offset < 0:
            raise TransportError(f"{where}: negative offset {offset}")
        f = self._file(folder, name)
        size = 0 if f is None else f.size
        if f is None and offset != 0:
            raise TransportError(f"{where}: does not exist; cannot write at {offset}")
        if offset > size:
            raise TransportError(f"{where}: cannot write at {offset}, past the end {size}")
        if offset < size:
            raise TransportError(
                f"{where}: cannot write at {offset}, inside the file ({size} bytes): "
                "S3 segments are immutable"
            )
        if not data:
            return size
        generation = _new_generation(None) if f is None else f.generation
        key = self._key(folder, name, generation, offset)
        self._put(folder, key, data)
        listing = self._listings[folder]
        if f is None:
            f = listing.files[name] = _File(name, generation)
        f.segments.append(_Segment(offset, len(data), key))
        return f.size

    def replace(self, folder: str, name: str, data: bytes) -> None:
        """PUT `data` as the one segment of a new generation, then delete the older ones.

        Between the two, readers see the new generation (the highest); a failed delete
        leaves garbage that the next `replace` of the file deletes.
        """
        check_name(self.url, folder, name)
        listing = self._listing(folder)
        old = listing.files.get(name)
        generation = _new_generation(None if old is None else old.generation)
        key = self._key(folder, name, generation, 0)
        self._put(folder, key, data)
        new = _File(name, generation, [_Segment(0, len(data), key)])
        listing.files[name] = new
        if old is not None:
            garbage = [s.key for s in old.segments] + old.older
            with self._errors(self._where(folder, name)):
                self._delete(garbage)

    def fragmented(self, folder: str, name: str) -> bool:
        """Whether the file has more than `MERGE_SEGMENTS` segments, so that compaction
        should rewrite it as one even when it would drop nothing (`memsync.hub.compaction`)."""
        check_name(self.url, folder, name)
        f = self._file(folder, name)
        return f is not None and len(f.segments) > MERGE_SEGMENTS

    def close(self) -> None:
        """Forget the cached listings; the client's connections are pooled by boto3."""
        self._listings.clear()

    # --- writing ----------------------------------------------------------------------

    def _put(self, folder: str, key: str, data: bytes) -> None:
        where = f"s3://{self.bucket}/{key}"
        mode = self._mode(folder)
        meta = {_CHECKSUM: xxhash.xxh3_64_hexdigest(data)}
        with self._errors(where):
            if mode == "plain":
                self.client.put_object(Bucket=self.bucket, Key=key, Body=data, Metadata=meta)
                return
            try:
                self.client.put_object(
                    Bucket=self.bucket, Key=key, Body=data, Metadata=meta, IfNoneMatch="*"
                )
            except Exception as exc:
                code = _code(exc)
                if code in _NO_CONDITIONAL:  # the marker said yes; this store says no
                    self.mode = "plain"
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=data, Metadata=meta)
                    return
                if code not in _PRECONDITION:
                    raise
                # The key exists: our own earlier attempt whose reply was lost (botocore
                # retried it), or another writer's. Ours only if it holds exactly our bytes.
                existing = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
                if existing != data:
                    raise TransportError(
                        f"{where}: already holds other bytes: another machine writes this "
                        "replica's file (a shared replica id?)"
                    ) from exc

    def _mode(self, folder: str) -> Mode:
        """Whether this store honours `If-None-Match: *`: the folder's marker, else a probe
        (a key written twice: the second must fail with 412), remembered in a marker."""
        listing = self._listings.get(folder) or self._list(folder)
        if "plain" in listing.modes:
            self.mode = "plain"
        elif "conditional" in listing.modes:
            self.mode = "conditional"
        else:
            self.mode = self._probe(folder)
            marker = f"{self._folder_prefix(folder)}{_MODE_DIR}/{self.mode}"
            with self._errors(self._where(folder)):
                self.client.put_object(Bucket=self.bucket, Key=marker, Body=b"")
            listing.modes.add(self.mode)
        return self.mode

    def _probe(self, folder: str) -> Mode:
        key = f"{self._folder_prefix(folder)}{_MODE_DIR}/probe-{secrets.token_hex(6)}"
        with self._errors(self._where(folder)):
            try:
                for _ in range(2):
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=b"", IfNoneMatch="*")
                mode: Mode = "plain"  # the second conditional PUT succeeded: ignored
            except Exception as exc:
                code = _code(exc)
                if code in _PRECONDITION:
                    mode = "conditional"
                elif code in _NO_CONDITIONAL:
                    mode = "plain"
                else:
                    raise
            self.client.delete_object(Bucket=self.bucket, Key=key)
        return mode

    def _delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), 1000):
            batch = [{"Key": k} for k in keys[start : start + 1000]]
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})


class _Vanished(Exception):
    """A listed segment is gone: its file was replaced since the listing."""


if TYPE_CHECKING:

    def _conforms(t: S3Transport) -> Transport:
        return t
