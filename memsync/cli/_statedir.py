"""One state directory for every memsync process of this machine: the config's.

The daemon reads its config and keeps its state in the config's `state_dir`. The everyday
commands do not load the config (pydantic is most of a command's start-up), and the
library's default is `$XDG_STATE_HOME/memsync`: a `state_dir` set elsewhere left the
commands' persistent views, recall and merge indexes apart from the daemon's, and a
compaction by the daemon then made the next `prompt` fold the whole file again.

So the command line reads only that key, and only when the config file exists: a plain
string found by a pattern (what `memsync init` and the example write), else the file
parsed by `tomllib`; then `$MEMSYNC_STATE_DIR` carries it to the library's default
(`local.dirs.default_state_dir`) and to every process started from here.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from memsync.local.dirs import STATE_DIR_VARIABLE, default_config_path

__all__ = ["configured_state_dir", "configured_state_dir_set"]

# Compiled at the first use (`re`'s cache), not at import: a command without a config file
# pays one stat for all this.
_NAME = rb"""(?:state_dir|"state_dir"|'state_dir')"""
_KEY = rb"^[ \t]*" + _NAME + rb"[ \t]*="
_PLAIN = _KEY + rb"""[ \t]*(?:"([^"\\\r\n]*)"|'([^'\r\n]*)')[ \t]*(?:#[^\r\n]*)?\r?$"""
_TABLE = rb"^[ \t]*\["


def configured_state_dir(config: Path) -> Path | None:
    """The `state_dir` that config file `config` names, as `memsync.config.load_config`
    reads it (`~` expanded), or None: no such file, no such key, or not a usable value
    (not a string, not an absolute path: a config the daemon refuses; the commands then
    keep the default, a state directory being only a cache and this machine's records)."""
    try:
        data = config.read_bytes()
    except OSError:
        return None
    table = re.search(_TABLE, data, re.MULTILINE)
    top = data if table is None else data[: table.start()]  # the keys before any [table]
    if re.search(_KEY, top, re.MULTILINE) is None:
        return None
    plain = b'"""' not in top and b"'''" not in top  # (no multi-line string to mislead)
    found = re.search(_PLAIN, top, re.MULTILINE) if plain else None
    if found is not None:
        raw = found[1] if found[1] is not None else found[2]
        try:
            text: object = raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    else:
        import tomllib  # (start-up: only for a value written some other way)

        try:
            text = tomllib.loads(data.decode("utf-8")).get("state_dir")
        except (UnicodeDecodeError, tomllib.TOMLDecodeError):
            return None
    if not isinstance(text, str):
        return None
    path = os.path.expanduser(text)
    return Path(path) if os.path.isabs(path) else None


@contextlib.contextmanager
def configured_state_dir_set(config: Path | None) -> Iterator[None]:
    """Within: the `state_dir` of config file `config` (None: the default config file),
    when it names one, is this process's state directory and its children's. After, the
    environment as it was (`main` may run several commands in one process: the tests)."""
    found = configured_state_dir(default_config_path() if config is None else config)
    if found is None:
        yield
        return
    before = os.environ.get(STATE_DIR_VARIABLE)
    os.environ[STATE_DIR_VARIABLE] = str(found)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(STATE_DIR_VARIABLE, None)
        else:
            os.environ[STATE_DIR_VARIABLE] = before
