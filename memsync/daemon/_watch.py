"""The daemon's file watcher: watchfiles over folders, reporting changed `.jsonl` files,
and how an event's path is matched to a configured one (`same_path`).

watchfiles is imported only when the watcher starts, so that `import memsync` stays light.
"""

from __future__ import annotations

import os
import threading
import unicodedata
from collections.abc import Callable
from pathlib import Path

from memsync.local.logs import get_logger

__all__ = ["canonical", "same_path", "watch_jsonl"]

logger = get_logger(__name__)

_STEP_MS = 20
"""The quiet wait after a change: each ms adds to every hop."""
_TIMEOUT_MS = 1000
"""How long one wait in watchfiles' Rust code lasts before it looks at `stop` again."""


def watch_jsonl(
    paths: list[Path],
    stop: threading.Event,
    debounce_ms: int,
    on_changes: Callable[[set[Path]], None],
    ready: threading.Event | None = None,
    also: Callable[[str], bool] | None = None,
) -> None:
    """Call `on_changes` with the `.jsonl` files changed directly in `paths` (folders: an
    atomic replace ends a file watch), until `stop` is set.

    `ready` is set once the folders are watched (every change from then on is reported), or
    once the watcher has failed to start: the daemon waits for it before its first pass, so
    that a peer's push landing during that pass wakes it (issue 24, item 18). `also`: the
    other files to report (bridged Markdown files, issue 22). A watcher
    that fails is logged and ends: it is an accelerator, polling still runs.
    """
    # RustNotify is watchfiles' documented low-level backend (what `watchfiles.watch`
    # wraps): its constructor returns once the folders are watched, a moment `watch()`
    # does not expose.
    from watchfiles._rust_notify import RustNotify

    try:
        with RustNotify([str(p) for p in paths], False, False, 300, False, False) as notify:
            if ready is not None:
                ready.set()
            while True:
                raw = notify.watch(debounce_ms, _STEP_MS, _TIMEOUT_MS, stop)
                if raw == "stop":
                    return
                if isinstance(raw, str):  # "timeout"; "signal" only in the main thread
                    continue
                changed = {Path(p) for _, p in raw if p.endswith(".jsonl") or (also and also(p))}
                if changed:
                    on_changes(changed)
    except Exception as exc:  # noqa: BLE001 (the watcher is an accelerator; polling still runs)
        logger.warning("file watching stopped (%s); relying on polling", exc)
    finally:
        if ready is not None:
            ready.set()  # a watcher that never started holds up no first pass


def canonical(path: Path) -> str:
    """`path` as a watcher may report it, in one spelling: symbolic links resolved (macOS's
    FSEvents reports `/private/var/...` for `/var/...`), Unicode NFC (HFS+ stores names
    NFD) and casefolded (APFS and HFS+ match names case-insensitively)."""
    try:
        real = os.path.realpath(path)
    except OSError:
        real = os.path.abspath(path)
    return unicodedata.normalize("NFC", real).casefold()


def same_path(event: Path, configured: Path) -> bool:
    """Whether a watcher's `event` path names the `configured` file or folder (issue 23,
    item 3): the same canonical spelling, or the same device and inode. A false match
    costs one extra pass; a missed one left a local write waiting for the reconcile pass
    (300 s)."""
    if event == configured or canonical(event) == canonical(configured):
        return True
    try:
        a, b = os.stat(event), os.stat(configured)
    except OSError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
