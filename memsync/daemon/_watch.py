"""The daemon's file watcher: watchfiles over folders, reporting changed `.jsonl` files.

watchfiles is imported only when the watcher starts, so that `import memsync` stays light.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)


def watch_jsonl(
    paths: list[Path],
    stop: threading.Event,
    debounce_ms: int,
    on_changes: Callable[[set[Path]], None],
) -> None:
    """Call `on_changes` with the `.jsonl` files changed directly in `paths` (folders: an
    atomic replace ends a file watch), until `stop` is set. A watcher that fails is logged
    and ends: it is an accelerator, polling still runs."""
    import watchfiles

    def jsonl(change: object, path: str) -> bool:
        return path.endswith(".jsonl")

    try:
        for changes in watchfiles.watch(
            *paths,
            watch_filter=jsonl,
            debounce=debounce_ms,
            step=20,  # the quiet wait after a change: each ms adds to every hop
            stop_event=stop,
            recursive=False,
            raise_interrupt=False,
            rust_timeout=1000,
            yield_on_timeout=False,
        ):
            on_changes({Path(p) for _, p in changes})
    except Exception as exc:  # noqa: BLE001 (the watcher is an accelerator; polling still runs)
        logger.warning("file watching stopped (%s); relying on polling", exc)
