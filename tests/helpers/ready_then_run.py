"""`python -m tests.helpers.ready_then_run ARGS...`: the `memsync ARGS` command, in a real
process that has imported everything the command runs before it starts: it prints "ready",
waits for a line on stdin, then runs `memsync.cli.main(ARGS)` and exits with its status.

A test that kills a command at random moments (tests/local/test_compaction_kill.py) times
its kills from the "go": the moments then fall in the command's own work, not in the
interpreter's start-up, which is most of a short command's life."""

from __future__ import annotations

import sys

import memsync.cli
import memsync.cli._files  # the file commands (`compact`), imported by `main` on demand
import memsync.local.compaction


def main() -> int:
    assert memsync.local.compaction  # imported for its cost, before the go
    print("ready", flush=True)
    sys.stdin.readline()
    return memsync.cli.main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
