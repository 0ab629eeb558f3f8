"""The push half of a sync pass: append to our own hub file the valid local records the
hub does not hold, at exactly the offset we know, after checking the file holds only our
bytes; then publish our watermarks (`memsync.hub.sync` has the whole story).
"""

from __future__ import annotations

import base64
import json
import secrets as _random
from collections.abc import Iterator
from dataclasses import asdict

from memsync.core.lines import LineSplitter, classify, split_complete
from memsync.core.merge import Withheld
from memsync.core.records import Record
from memsync.core.scan import line_digest
from memsync.core.secrets import record_secrets
from memsync.core.timestamps import format_ts
from memsync.core.watermarks import (
    WATERMARK_SUFFIX,
)
from memsync.errors import ReplicaClash, TransportError
from memsync.hub._pass import (
    HUB_FILE_SUFFIX,
    HUB_TAIL_BYTES,
    OWN_CHECK_BYTES,
    PUSH_CHUNK_BYTES,
    READ_BYTES,
    PassContext,
    b64,
    header_generation,
    is_record_line,
)
from memsync.hub.state import matching_intent, replace_done, replace_intents
from memsync.hub.transports import PushChunks, Truncates
from memsync.local.fileindex import Cursor, cursor_at, cursor_valid
from memsync.local.merge import withheld_json
from memsync.local.storage import read_chunks

__all__ = ["clash", "foreign_lines", "publish_watermarks", "push"]

_FORGED = (
    "does not authenticate under this machine's keys, in our own hub file: written by no "
    "memsync holding our key (altered in the hub); never merged or pushed"
)


def push(ctx: PassContext) -> None:
    """Step 2 of a pass (`memsync.hub.sync`): append to our own hub file, at the offset we
    know, the local records the hub does not hold, once it holds only our bytes."""
    size = ctx.t.size(ctx.memory, ctx.own) or 0
    expected = _verified_size(ctx, size)
    if size > expected:
        # A torn last line, ours, from a write cut short (a dropped session, a full
        # disk). No peer has read it: readers take complete lines only.
        if isinstance(ctx.t, Truncates):
            # Take it back (issue 13, item 14); its record is pushed again whole below.
            ctx.t.truncate(ctx.memory, ctx.own, expected)
            if (ctx.t.size(ctx.memory, ctx.own) or 0) != expected:
                raise TransportError(
                    f"{ctx.where(ctx.own)}: could not cut a torn write back to "
                    f"{expected} bytes; it will be checked again on the next pass"
                )
        else:
            expected = _terminate(ctx, size, expected)

    limit = ctx.t.push_chunk_bytes if isinstance(ctx.t, PushChunks) else PUSH_CHUNK_BYTES
    for data, count, cursor in _outgoing(ctx):
        header = b""
        if data and expected == 0:
            gen = _random.token_hex(8)
            # issue 12: names scheme and key id; issue 13 item 11: and who writes it
            header = ctx.codec.header(ctx.now, gen, ctx.install)
            ctx.state.own_generation = gen
        # The codec encrypts (or not) and splits on line boundaries (issue 12); a
        # transport may ask for larger writes (S3: one object per write, so fewer).
        for chunk, plain in ctx.codec.chunks(header, data, limit):
            expected = _write(ctx, expected, chunk, plain)
        ctx.report.pushed_records += count
        if cursor is not None:
            ctx.state.pushed = asdict(cursor) | {"tail": cursor.tail.hex()}


def _terminate(ctx: PassContext, size: int, expected: int) -> int:
    """For a hub that cannot cut a file (S3, where writes do not tear anyway): end our
    torn last line with a newline, so that it stays its own bad line (rule 1)."""
    torn = ctx.t.read(ctx.memory, ctx.own, expected, size - expected)
    ctx.state.own_size, ctx.state.own_tail = (
        size,
        b64((base64.b64decode(ctx.state.own_tail) + torn)[-HUB_TAIL_BYTES:]),
    )
    expected = _write(ctx, size, b"\n")
    # Now a complete line of the hub: when the cut fell just before its "\n" it is
    # a whole record, and pushing that record again would duplicate it.
    ctx.hub.add(map(line_digest, ctx.codec.plain_lines([torn])), ctx.now)  # issue 12
    return expected


def _verified_size(ctx: PassContext, size: int) -> int:
    """Where our next write goes, after checking our hub file holds only our bytes."""
    st = ctx.state
    if st.own_size is None:
        # Nothing known (a new state directory): what is there is ours, and was read
        # by the pull like any peer file, up to the size its listing gave. A listing
        # can be older than the file (an attribute cache): the hub holds the rest too.
        st.own_size, st.own_tail = _adopt(ctx, 0, size)
        _learn_own(ctx, ctx.own_read, st.own_size)
        return st.own_size
    if size == 0 and st.own_size > 0:
        raise TransportError(
            f"{ctx.where(ctx.own)}: our hub file is gone (it held {st.own_size} bytes): "
            "the hub is new or not mounted. Mount the share if it is not; if the hub "
            f"moved to a new empty folder, delete {ctx.state_path} to push everything "
            "again",
            None,
            ctx.where(ctx.own),
        )
    if size < st.own_size:
        return _rewritten(ctx, size, f"it shrank from {st.own_size} to {size} bytes")
    tail = base64.b64decode(st.own_tail)
    check = tail[-OWN_CHECK_BYTES:]
    begin = st.own_size - len(check)
    # An S3 hub's file in the generation we checked last time was only appended to.
    vouched = ctx.own_listed is not None and ctx.own_listed == st.own_hub_generation
    if not vouched:
        if check and ctx.t.read(ctx.memory, ctx.own, begin, len(check)) != check:
            return _rewritten(ctx, size, "its bytes before our last write changed")
        # Every replace writes a new generation token in the header (ours, or another
        # installation's compaction): caught here at any size, the same one included,
        # for one small read (issue 24, item 19 (c)). Bytes edited in place between
        # header and tail are not: that would take a read of the whole file per pass;
        # peers' files are checked the same way (`memsync.hub.sync`).
        gen = ctx.read_generation(ctx.own, count=False) if st.own_size else None
        if st.own_generation is None:
            st.own_generation = gen  # a state saved before it was kept: learn it
        elif gen != st.own_generation:
            return _rewritten(ctx, size, "it was replaced: its header is not the one we wrote")
    st.own_hub_generation = ctx.own_listed
    if size > st.own_size:
        _appended(ctx, size, tail)
    return st.own_size


def _appended(ctx: PassContext, size: int, tail: bytes) -> None:
    """Our hub file holds more than we know of (`tail`: the bytes before): our own
    write whose answer was lost (every line is one of our local records), someone
    else's (a clash), or, in an encrypted hub, lines that do not authenticate under
    our keys: written by no memsync holding them, reported as bad lines (issue 24)."""
    st = ctx.state
    assert st.own_size is not None
    extra = ctx.t.read(ctx.memory, ctx.own, st.own_size, size - st.own_size)
    lines, end = split_complete(extra, at_start=st.own_size == 0)
    forged = set(ctx.codec.unauthenticated(lines))
    if forged:
        first = _lines_before(ctx, st.own_size) + 1
        for i in sorted(forged):
            ctx.report.bad.append(
                {"file": ctx.where(ctx.own), "line": first + i, "reason": _FORGED}
            )
    lines = [raw for i, raw in enumerate(lines) if i not in forged]
    lines = ctx.codec.plain_lines(lines)  # issue 12: judged as records, not ciphertext
    if foreign_lines(ctx, lines)[0]:
        raise clash(ctx, f"{size - st.own_size} bytes appeared that we did not write")
    ctx.hub.add(map(line_digest, lines), ctx.now)
    st.own_size, st.own_tail = (
        st.own_size + end,
        b64((tail + extra[:end])[-HUB_TAIL_BYTES:]),
    )


def _lines_before(ctx: PassContext, offset: int) -> int:
    """How many lines our hub file holds before `offset` (a rare path: bad lines)."""
    count, done = 0, 0
    while done < offset:
        block = ctx.t.read(ctx.memory, ctx.own, done, min(READ_BYTES, offset - done))
        if not block:
            break
        count += block.count(b"\n")
        done += len(block)
    return count


def _rewritten(ctx: PassContext, size: int, what: str) -> int:
    """Our hub file is not as we left it. Ours only if a replace of ours whose end we
    did not see (a kill or a lost reply right after the replace of hub compaction or of
    a key change, issue 13 item 9) wrote it: the intent saved before that replace says
    so by size and digest, whatever the local file holds now (issue 24). Anything else
    is a clash, another machine writing it; or, in an encrypted hub, lines that do not
    authenticate under our keys, which no memsync holding them wrote."""
    blocks: list[bytes] = []
    done = 0
    while done < size:
        block = ctx.t.read(ctx.memory, ctx.own, done, min(READ_BYTES, size - done))
        if not block:
            break
        blocks.append(block)
        done += len(block)
    data = b"".join(blocks)
    intent = matching_intent(replace_intents(ctx.state_dir, ctx.memory, ctx.remote), data)
    if intent is None:
        forged = ctx.codec.unauthenticated(split_complete(data, at_start=True)[0])
        if forged:
            raise TransportError(
                f"{ctx.where(ctx.own)}: our hub file was rewritten ({what}) and holds "
                f"{len(forged)} line(s) that do not authenticate under this machine's "
                f"keys, the first at line {forged[0] + 1}: written by no memsync holding "
                "our key (altered in the hub). Restore the file; or delete it, and the "
                "sync state of this remote in the state directory, to push all again"
            )
        raise clash(ctx, what)
    mine = data[: intent.size]
    lines, _ = split_complete(mine, at_start=True)
    st = ctx.state
    st.own_size, st.own_tail = intent.size, b64(mine[-HUB_TAIL_BYTES:])
    st.own_generation = header_generation(mine)
    st.own_hub_generation = None  # checked by its bytes from now on
    ctx.hub.add(map(line_digest, ctx.codec.plain_lines(lines)), ctx.now)
    st.save(ctx.state_path)  # the intents are spent only once this is saved
    replace_done(ctx.state_dir, ctx.memory, ctx.remote)
    if size > intent.size:
        _appended(ctx, size, mine[-HUB_TAIL_BYTES:])
    return st.own_size


def _learn_own(ctx: PassContext, begin: int, end: int) -> None:
    """Record that the hub holds the complete lines of our file in [begin, end)."""
    # linear, whatever the lines (issue 13, item 4); a BOM is no line (rule 1)
    splitter = LineSplitter(at_start=begin == 0)
    while begin < end:
        data = ctx.t.read(ctx.memory, ctx.own, begin, min(READ_BYTES, end - begin))
        if not data:
            break
        begin += len(data)
        lines, _ = splitter.feed(data)
        # The store holds plain lines' digests (issue 12: decrypted when encrypted).
        ctx.hub.add(map(line_digest, ctx.codec.plain_lines(lines)), ctx.now)


def _adopt(ctx: PassContext, begin: int, size: int) -> tuple[int, str]:
    """Take our hub file as it is (complete lines); return its size and tail."""
    if size == 0:
        return 0, ""
    data = ctx.t.read(ctx.memory, ctx.own, max(0, size - HUB_TAIL_BYTES), HUB_TAIL_BYTES)
    end = data.rfind(b"\n") + 1
    cut = size - len(data) + end
    ctx.state.own_generation = ctx.read_generation(ctx.own)
    return cut, b64(data[:end][-HUB_TAIL_BYTES:])


def foreign_lines(ctx: PassContext, lines: list[bytes]) -> tuple[int, int]:
    """Of the records among `lines` (plain hub lines), how many are not among our local
    records (bytes of another machine's), and how many are. Only valid records tell
    whose bytes these are: a header is not one, nor a torn line of ours that a pass
    whose answer was lost terminated. A record goes out without the "\\r" of a CRLF
    local line: either form is ours."""
    records = [raw for raw in lines if is_record_line(raw)]
    ctx.index.refresh()  # our latest local records, to recognize them
    mine = ctx.index.intersection(
        [d for raw in records for d in (line_digest(raw), line_digest(raw + b"\r"))]
    )
    foreign = sum(
        line_digest(raw) not in mine and line_digest(raw + b"\r") not in mine for raw in records
    )
    return foreign, len(records) - foreign


def clash(ctx: PassContext, what: str, stopped: str = "Pushing to") -> ReplicaClash:
    """The clash to raise; the report says so too (`error_kind`), so that the daemon's
    status counts the remote a problem at once, not after the grace period of failures
    that pass by themselves: pushing (or syncing) stays stopped until the user acts."""
    ctx.report.error_kind = ReplicaClash.KIND
    return ReplicaClash(
        f"{ctx.where(ctx.own)}: our hub file holds bytes this machine did not write "
        f"({what}): another machine uses the replica id {ctx.replica!r} (a cloned VM, "
        "a copied home directory, or one id configured on two machines?). Give this "
        "machine a new id (a new id for the other one would not clear this): set "
        "replica = \"<new name>\" in its config, or delete the file 'replica' in its "
        f"state directory; then sync again. {stopped} this remote is stopped until then."
    )


def _write(ctx: PassContext, offset: int, chunk: bytes, plain: list[bytes] | None = None) -> int:
    """Write whole lines at exactly `offset` of our hub file; record that they are
    ours and that the hub holds them (`plain`: their local lines, when they differ
    from the hub's) before anything else can fail."""
    new_size = ctx.t.write_at(ctx.memory, ctx.own, offset, chunk)
    if new_size != offset + len(chunk):
        raise TransportError(
            f"{ctx.where(ctx.own)}: wrote {len(chunk)} bytes at {offset} but the file "
            f"is {new_size} bytes; it will be checked again on the next pass"
        )
    lines = chunk.split(b"\n")[:-1] if plain is None else plain  # issue 12
    ctx.hub.add(map(line_digest, lines), ctx.now)
    tail = base64.b64decode(ctx.state.own_tail) + chunk
    ctx.state.own_size, ctx.state.own_tail = new_size, b64(tail[-HUB_TAIL_BYTES:])
    ctx.state.save(ctx.state_path)  # a crash now must not forget these bytes are ours
    ctx.report.pushed_bytes += len(chunk)
    return new_size


def _outgoing(ctx: PassContext) -> Iterator[tuple[bytes, int, Cursor | None]]:
    """The valid local records after the pushed cursor that the hub does not hold, a
    batch per chunk of the local file (memory bounded by the chunk, issue 14): each
    with its count and the cursor just past it."""
    ctx.index.refresh()
    saved = ctx.state.pushed
    cursor = None
    if saved is not None:
        cursor = Cursor(saved["ino"], saved["offset"], saved["line"], bytes.fromhex(saved["tail"]))
        if not cursor_valid(ctx.local, cursor):
            cursor = None
    if not ctx.local.exists():
        return
    offset, line = (cursor.offset, cursor.line) if cursor else (0, 1)
    where = str(ctx.local)
    for chunk in read_chunks(ctx.local, offset, line):
        out: list[bytes] = []
        # Lines repeated within the chunk; across chunks, the hub store knows what the
        # batches before were written (`_write` records it before the next is read).
        seen: set[int] = set()
        # A CRLF line goes out without its "\r": judge that form against the hub.
        lines = [raw.rstrip(b"\r") if raw.endswith(b"\r") else raw for raw in chunk.lines]
        digests = list(map(line_digest, lines))
        known = ctx.hub.intersection(digests)
        for n, (raw, digest) in enumerate(zip(lines, digests, strict=True), chunk.first_line):
            if digest in known or digest in seen:
                continue
            rec = classify(raw)
            if type(rec) is not Record:  # bad lines never spread (rule 4)
                continue
            seen.add(digest)
            secrets = record_secrets(raw)
            if secrets:  # nor do credentials (issue 13, item 6)
                w = Withheld(where, n, rec.id, tuple(secrets))
                ctx.report.withheld.append(withheld_json(w))
                continue
            out.append(raw)
        offset, line = chunk.end, chunk.first_line + len(chunk.lines)
        data = b"".join(raw + b"\n" for raw in out)
        yield data, len(out), cursor_at(ctx.local, offset, line)


def publish_watermarks(ctx: PassContext) -> None:
    doc = {
        "replica": ctx.replica,
        "read": {
            peer + HUB_FILE_SUFFIX: {"offset": p.offset, "generation": p.generation}
            for peer, p in sorted(ctx.state.peers.items())
        },
    }
    if ctx.state.weighed is not None:  # issue 24: see `Watermarks.weighed`
        doc["weighed"] = {
            name: {"offset": pos[0], "generation": pos[1]}
            for name, pos in sorted(ctx.state.weighed.items())
        }
    text = json.dumps(doc, sort_keys=True)
    if text == ctx.state.watermarks:
        return
    doc["updated_at"] = format_ts(ctx.now)
    ctx.t.replace(ctx.memory, ctx.replica + WATERMARK_SUFFIX, json.dumps(doc).encode())
    ctx.state.watermarks = text
