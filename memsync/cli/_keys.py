"""`memsync key new | show | import | rotate`: the keys of hub encryption (issue 12).

Registered into `memsync.cli` through its `_EXTRA_COMMANDS` hook, so that the CLI module
only gains one line. Errors are `MemsyncError`s: `cli.main` prints them as one
`memsync: ...` line (exit 2). Keys go to stdout only for `show`, with a warning on stderr;
everything else names keys by their id.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.errors import KeyFileError, MemsyncError

if TYPE_CHECKING:
    from memsync.config import Config
    from memsync.hub.keys import Keyring

__all__ = [
    "cmd_key_import",
    "cmd_key_new",
    "cmd_key_rotate",
    "cmd_key_show",
    "config_or_default",
    "register",
]

_WARNING = (
    "memsync: this is a SECRET key: anyone holding it can read your hubs. Paste it only "
    "into `memsync key import` on your own machines, over a channel you trust; never into "
    "a chat, a ticket, a config file or a memory."
)


def config_or_default(path: Path | None) -> Config | None:
    """The config named, else the default one when it exists, else None (no remotes)."""
    from memsync.config import default_config_path, load_config

    if path is not None:
        return load_config(path)
    default = default_config_path()
    return load_config(default) if default.exists() else None


def cmd_key_new(args: argparse.Namespace) -> int:
    from memsync.config.wiring import key_file_of
    from memsync.hub.keys import add_key, load_keyring, new_master_key

    path = key_file_of(config_or_default(args.config))
    if path.exists():
        raise KeyFileError(
            f"{path}: a key file is already there (current key "
            f"{load_keyring(path).ids[0]}); `memsync key rotate` replaces the current key "
            "and keeps the others for reading"
        )
    ring = add_key(path, new_master_key())
    print(f"{path}: new key {ring.ids[0]}")
    print(
        "Set encrypt = true on the remotes to encrypt, then copy the key to the other "
        "machines: `memsync key show` here, `memsync key import` there."
    )
    return 0


def cmd_key_show(args: argparse.Namespace) -> int:
    from memsync.config.wiring import key_file_of
    from memsync.hub.crypto import format_key
    from memsync.hub.keys import load_keyring

    ring = load_keyring(key_file_of(config_or_default(args.config)))
    keys = ring.keys if args.all else ring.keys[:1]
    print(_WARNING, file=sys.stderr)
    for key in keys:
        print(format_key(key))
    if not args.all and len(ring.keys) > 1:
        print(
            f"memsync: {len(ring.keys) - 1} older key(s) kept for reading "
            f"({', '.join(ring.ids[1:])}); --all shows them too",
            file=sys.stderr,
        )
    return 0


def cmd_key_import(args: argparse.Namespace) -> int:
    from memsync.config.wiring import key_file_of
    from memsync.hub.crypto import key_id, parse_key
    from memsync.hub.keys import add_key

    config = config_or_default(args.config)
    path = key_file_of(config)
    texts: list[str] = list(args.keys)
    if not texts:  # from stdin: a key on a command line lands in the shell's history
        if sys.stdin.isatty():
            print("memsync: paste the key (msk1-...), then Ctrl-D", file=sys.stderr)
        texts = [t for t in sys.stdin.read().split() if t]
    keys: list[bytes] = []
    for n, text in enumerate(texts, 1):
        key = parse_key(text)
        if key is None:
            raise MemsyncError(
                f"key {n} of {len(texts)} is not a key (keys look like msk1- and 43 "
                "characters, as `memsync key show` prints them)"
            )
        keys.append(key)
    if not keys:
        raise MemsyncError("no key given: pass it, or pipe it in (memsync key show there)")
    ring: Keyring | None = None
    for key in reversed(keys):  # the first given ends up current, as `show --all` lists
        ring = add_key(path, key)
    assert ring is not None
    print(f"{path}: current key {key_id(keys[0])} ({len(ring.keys)} key(s) held for reading)")
    if config is not None and any(r.encrypt for r in config.remote):
        print(
            "The next `memsync sync` (or the daemon's next pass) rewrites this machine's own "
            "hub files under it."
        )
    return 0


def cmd_key_rotate(args: argparse.Namespace) -> int:
    from memsync.config.wiring import key_file_of
    from memsync.hub.keys import add_key, load_keyring, new_master_key

    config = config_or_default(args.config)
    path = key_file_of(config)
    old = load_keyring(path)
    ring = add_key(path, new_master_key())
    print(f"{path}: new current key {ring.ids[0]}; {old.ids[0]} and older kept for reading")
    failed = 0
    if config is not None:
        for line, ok in _reencode_own_files(config):
            print(line)
            failed += not ok
    print(
        "On each other machine syncing these hubs: `memsync key import` with the new key "
        "(`memsync key show` here prints it), then `memsync sync`. Until a machine has it, "
        "its syncs stop with a message naming the key. Once every machine has synced, the "
        f"older keys may be removed from {path} (keep the first line)."
    )
    return 1 if failed else 0


def _reencode_own_files(config: Config) -> list[tuple[str, bool]]:
    """Rewrite this machine's own hub file of every encrypted memory and remote under the
    current key (memsync.hub.codec's `prepare`, under the pass lock); one line each."""
    from memsync.config.wiring import codec_for, open_remote, state_of
    from memsync.hub.state import SyncState, pass_lock, resolve_replica

    out: list[tuple[str, bool]] = []
    state_dir = state_of(config)
    replica = resolve_replica(config.replica, state_dir)
    for mem in config.memory:
        for rc in config.memory_remotes(mem):
            if not rc.encrypt:
                continue
            codec = codec_for(rc, config, mem.name)
            transport = open_remote(rc)
            try:
                with pass_lock(state_dir, mem.name, rc.name):
                    state = SyncState.load(state_dir.sync_state(mem.name, rc.name))
                    codec.prepare(transport, mem.name, replica + ".jsonl", state, state_dir)
                out.append((f"{mem.name} <-> {rc.name}: own hub file under the new key", True))
            except MemsyncError as exc:
                out.append((f"{mem.name} <-> {rc.name}: FAILED: {exc}", False))
            finally:
                transport.close()
    return out


def register(sub: Any) -> None:
    """Add `memsync key ...` to the CLI's subcommands (`sub`: argparse's subparsers)."""
    key = sub.add_parser("key", help="the hub encryption keys: new, show, import, rotate")
    ksub = key.add_subparsers(dest="key_command", metavar="ACTION", parser_class=type(key))
    ksub.required = True

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--config",
            type=Path,
            default=None,
            metavar="PATH",
            help="the config whose key_file to use (default: keys beside the config)",
        )

    p = ksub.add_parser("new", help="make this machine's first key (the first machine only)")
    common(p)
    p.set_defaults(handler=cmd_key_new)
    p = ksub.add_parser("show", help="print the key to copy to another machine (SECRET)")
    p.add_argument("--all", action="store_true", help="the older keys too, current first")
    common(p)
    p.set_defaults(handler=cmd_key_show)
    p = ksub.add_parser("import", help="take a key from another machine; it becomes current")
    p.add_argument("keys", nargs="*", metavar="KEY", help="msk1-... (default: read stdin)")
    common(p)
    p.set_defaults(handler=cmd_key_import)
    p = ksub.add_parser("rotate", help="a new current key; re-encrypt our own hub files")
    common(p)
    p.set_defaults(handler=cmd_key_rotate)
