"""The daemon's pieces of work, each run and then recorded: what one request does to
the status, the back-off and the log. `memsync.daemon.service` decides when (threads,
requests, reloads); this module says what a pass's report and a compaction's outcome mean
for the person reading `memsync status` and the journal.

- A pass (`sync_once`, in the remote's worker): `record_pass` resets or grows the remote's
  back-off, notes the pass or the failure in its status, and logs what a person must see
  once (a failure when it starts or changes cause, withheld credentials, a replica back
  after the horizon).
- A validation of a local file (in the main loop): `validate` logs each new bad line once.
- A compaction (`compact_memory`, the one sequence `memsync compact` also runs, in the
  compaction worker): `compact` runs it and says how it ended (`CompactionOutcome`).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from memsync.config import CompactionConfig, MemoryConfig
from memsync.daemon.status import MemoryStatus, RemoteStatus, returns
from memsync.errors import MemsyncError, NotQuiet
from memsync.hub.codec import Codec
from memsync.hub.compaction import compact_memory
from memsync.hub.sync import SyncReport
from memsync.hub.transports import Transport
from memsync.local.fresh import now_us
from memsync.local.logs import get_logger
from memsync.local.reading import BadLineWatch
from memsync.local.statedir import StateDir
from memsync.local.viewstore import ViewStore

__all__ = [
    "BACKOFF_CAP",
    "Backoff",
    "CompactionOutcome",
    "compact",
    "record_pass",
    "validate",
]

logger = get_logger(__name__)

BACKOFF_CAP = 300.0
"""The longest wait between two attempts at a failing remote, in seconds."""


@dataclass
class Backoff:
    """A memory and remote's failures in a row, and when to try again."""

    failures: int = 0
    next_try: float = 0.0
    last_error: str | None = None  # logged again only when the cause changes


def record_pass(
    memory: str,
    remote: str,
    report: SyncReport,
    st: RemoteStatus,
    backoff: Backoff,
    *,
    now: int,
    horizon: float,
    retired: set[str],
    write_mode: str | None,
) -> None:
    """The bookkeeping of one pass of `memory` with `remote`: its back-off, its status
    `st`, and its log lines. `horizon` (microseconds) and `retired` say when a replica's
    return is news (rule 15); `write_mode` is the transport's (S3 only), if it has one.
    A failed pass sets `backoff.next_try`; the caller asks for the pass again."""
    if report.ok:
        if backoff.failures:
            logger.info(
                "%s <-> %s: working again after %d failed attempt(s)",
                memory,
                remote,
                backoff.failures,
            )
        backoff.failures, backoff.next_try, backoff.last_error = 0, 0.0, None
        # Said loudly: a replica silent for longer than the horizon publishes again.
        for message in returns(memory, remote, st.replicas, report.replicas, now, horizon, retired):
            logger.warning("%s", message)
        st.note_pass(report, now)
        for w in report.withheld:  # issue 13, item 6: a person must look at these
            logger.warning(
                "%s <-> %s: withheld %s:%s, id %s: it looks like a credential (%s); "
                "neither merged nor pushed",
                memory,
                remote,
                w["file"],
                w["line"],
                w["id"],
                ", ".join(w["looks_like"]),
            )
        st.write_mode = write_mode or st.write_mode
        if report.pulled_records or report.pushed_records:
            logger.info(
                "%s <-> %s: %d in, %d out",
                memory,
                remote,
                report.pulled_records,
                report.pushed_records,
            )
        return
    if backoff.failures == 0:  # logged when it starts failing, not at every attempt
        logger.warning(
            "%s <-> %s: failing: %s (retrying with back-off)", memory, remote, report.error
        )
    elif report.error != backoff.last_error:  # and again when the cause changes
        logger.warning("%s <-> %s: still failing, now: %s", memory, remote, report.error)
    backoff.last_error = report.error
    backoff.failures += 1
    delay = min(BACKOFF_CAP, 2.0 ** min(backoff.failures, 12)) * random.uniform(0.8, 1.2)  # noqa: S311 (jitter)
    backoff.next_try = time.monotonic() + delay
    st.note_failure(report.error, now, report.error_kind)


def validate(watch: BadLineWatch) -> int:
    """Log each new bad line of a local file once (incremental: only the bytes appended
    since the last look); return how many bad lines it holds."""
    try:
        for bad in watch.new_bad_lines():
            logger.warning("%s:%d: bad line: %s", bad.file, bad.line, bad.reason)
    except MemsyncError as exc:
        logger.error("%s", exc)
    return watch.bad


@dataclass(frozen=True)
class CompactionOutcome:
    """How a scheduled compaction ended."""

    note: Callable[[MemoryStatus], None]
    """What to record in the memory's status."""
    postponed: bool = False
    """The file was busy: try again later."""
    done: bool = False
    """Compacted: the memory's remotes get a pass (peers see the new generation)."""


def compact(
    mem: MemoryConfig,
    cc: CompactionConfig,
    *,
    remotes: Sequence[str],
    replica: str,
    state: StateDir,
    transports: Mapping[str, Transport],
    codecs: Mapping[str, Codec],
    forced: bool,
    postponements: int = 0,
) -> CompactionOutcome:
    """Compact one memory, its local file and our own file in each hub (rules 15 and 16),
    and log what happened. `forced`: after `postponements` that reached
    `max_postpone_seconds`, without the quiet period (agents writing continuously keep the
    file from ever being quiet; the drain of rule 16 keeps the lines appended meanwhile)."""
    if forced:
        logger.warning(
            "%s: compaction postponed %d time(s) (max_postpone_seconds = %g): compacting "
            "anyway under the lock; lines appended meanwhile are copied into the new file",
            mem.path,
            postponements,
            cc.max_postpone_seconds,
        )
    try:
        done = compact_memory(
            mem.path,
            memory=mem.name,
            remotes=remotes,
            replica=replica,
            state_dir=state,
            transports=transports,
            codecs=codecs,
            horizon_days=cc.tombstone_horizon_days,
            quiet_seconds=cc.quiet_seconds,
            force=forced,
            store=ViewStore(state),  # the next reader resumes from it (issue 20)
        )
    except NotQuiet as exc:
        logger.info("%s: compaction postponed: %s", mem.path, exc)
        why = str(exc)
        return CompactionOutcome(lambda ms: ms.note_postponed(why, now_us()), postponed=True)
    except (MemsyncError, OSError) as exc:
        logger.error("%s: compaction failed: %s", mem.path, exc)
        note = f"failed: {exc}"
        return CompactionOutcome(lambda ms: setattr(ms, "last_compaction_note", note))
    result = done.local
    logger.info("%s: compacted, %d -> %d bytes", mem.path, result.size_before, result.size_after)
    for name in remotes:  # our own file in each hub, compacted the same way
        if (failure := done.hub_errors.get(name)) is not None:
            logger.warning("%s <-> %s: hub file not compacted: %s", mem.name, name, failure)
        elif (sizes := done.hub_files.get(name)) is not None:
            logger.info("%s <-> %s: hub file compacted, %d -> %d bytes", mem.name, name, *sizes)
    return CompactionOutcome(lambda ms: ms.note_compacted(now_us(), forced=forced), done=True)
