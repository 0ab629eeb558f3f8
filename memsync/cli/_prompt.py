"""`memsync prompt`: the memory block an agent loads at every session start.

Its own module so that it starts with only what the persistent view's quick answer needs
(issue 20: at most 3x the interpreter's start-up): the fold, the view and the located scan
are imported only when the quick part cannot answer.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from memsync.cli._common import EXIT_OK, configured_memory, existing, report_bad
from memsync.errors import UsageError

if TYPE_CHECKING:
    import argparse

    from memsync.core.lines import BadLine

__all__ = ["cmd_prompt"]


def cmd_prompt(args: argparse.Namespace) -> int:
    if args.files and args.memory is not None:
        raise UsageError("prompt: give FILE... or --memory NAME, not both")
    if not args.files:
        # The session-start hook's spelling (issue 24, item 17): a memory of the config, or
        # the default one. Before its first entry there is nothing to load: print nothing.
        path, _ = configured_memory(args.memory, args.config, "prompt")
        if not path.exists():
            return EXIT_OK
        args.files = [path]
    from memsync.local.statedir import StateDir
    from memsync.local.viewstore import DETACH_BYTES, ViewStore

    # A large file's first store is written by a detached process: the block comes
    # from the fold meanwhile (a cold prompt of 1M records: 7.5 s otherwise, issue 20).
    files = existing(args.files)
    store = ViewStore(StateDir.of(), detach_from=DETACH_BYTES)
    quick: tuple[str, list[BadLine], list[str]] | None = None
    if len(files) == 1 and args.max_chars is not None:
        from memsync.local.fresh import now_us
        from memsync.local.viewranks_open import stored_prompt

        now = now_us() if args.now is None else args.now
        quick = stored_prompt(store, files[0], args.scope, args.max_chars, now)
        if quick is not None:  # from the top of the drop order alone (issue 20)
            sys.stdout.write(quick[0])
            report_bad(quick[1], quick[2])
            return EXIT_OK
    from memsync.local.fresh import now_us
    from memsync.local.located import located_view, rank
    from memsync.local.reading import no_gc, prompt_of, prompt_of_described

    at = now_us() if args.now is None else args.now
    # The view is ranked only if the quick part written by the fold cannot answer: ranking
    # a million entries is half a second that the drop order of the quick part spares.
    quick_after = len(files) == 1 and args.max_chars is not None
    # A million records hold no cycles: the cyclic GC would walk them in vain.
    with no_gc(), located_view(files, at, store, ranked=not quick_after) as view:
        if quick_after and view.described:
            # The fold has just written the file's store and quick part (cold, or over
            # 1 MB behind): its drop order answers without ranking every entry again
            # (a second at 1M). (A detached process writing them: ranked here.)
            # (Its entries are those live when it was written: the clock now, not
            # the command's start, which is earlier.)
            now = now_us() if args.now is None else args.now
            quick = stored_prompt(store, files[0], args.scope, args.max_chars, now)
        if quick is None and quick_after:
            rank(view, at)
        if args.max_chars is None or not view.described:
            text = prompt_of(view.records, args.scope, args.max_chars, view.lines())
        else:
            # Else only the lines the block holds are read (issue 20).
            text = (
                quick[0]
                if quick is not None
                else prompt_of_described(
                    view.records, args.scope, args.max_chars, view.line, view.length
                )
            )
    sys.stdout.write(text)
    report_bad(view.scan.bad, view.scan.headerless)
    return EXIT_OK
