"""The daemon: wiring only (STYLE guideline 6).

`service.Daemon` composes the watcher (`_watch`), the scheduler, one worker thread per
remote (`_worker`), signals and sd_notify (`_systemd`) around `memsync.hub.sync` and
compaction, and keeps its status document (`status`) where `memsync status` reads it.
No line is judged and no merge is planned here.
"""

from __future__ import annotations

from memsync.daemon.service import Daemon

__all__ = ["Daemon"]
