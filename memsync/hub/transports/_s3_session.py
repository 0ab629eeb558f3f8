"""boto3 sessions that share one botocore data loader per process.

Each `boto3.session.Session` makes its own botocore loader, which parses S3's service model,
its endpoint rules and the partitions from JSON again: about 0.25 s of CPU for every S3
transport a process opens (the daemon with several S3 remotes, `memsync status` reading each
remote's receipts, a test suite). The loader caches what it parsed and holds nothing of a
session's own (credentials, profile, region stay per session), so one loader serves them all.
Imported only when an `s3://` remote is opened (boto3 stays out of `import memsync`).
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["new_session"]

_lock = threading.Lock()
_loader: Any = None


def new_session(profile: str | None) -> Any:
    """A new `boto3.session.Session` for `profile` (None: boto3's default chain) whose
    botocore session uses this process's shared data loader."""
    global _loader
    import boto3
    import botocore.session

    with _lock:  # a botocore session is not thread-safe while being set up
        core = botocore.session.get_session()
        if _loader is None:
            _loader = core.get_component("data_loader")
        else:
            core.register_component("data_loader", _loader)
        return boto3.session.Session(botocore_session=core, profile_name=profile)
