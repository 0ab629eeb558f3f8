"""Architecture guards (STYLE guidelines 2, 3 and 10).

- `memsync/core/` is pure: it imports nothing that does I/O, reads the clock or logs, and
  nothing of the imperative shell.
- `memsync.__all__` is the public surface: sorted, and exactly the public names of the
  package.
- The library never configures logging; only the application (`cli.main`, the daemon) does.
"""

from __future__ import annotations
import __future__

import ast
import hashlib
import logging
import subprocess
import sys
import types
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

import memsync
from memsync import Memory
from tests.helpers.imports import large_memory, modules_loaded

CORE = Path(memsync.__file__).resolve().parent / "core"

FORBIDDEN_TOP = frozenset(
    {
        "os",
        "io",
        "pathlib",
        "time",
        "logging",
        "socket",
        "threading",
        "subprocess",
        "paramiko",
        "watchfiles",
        "apscheduler",
        "filelock",
        # Beyond STYLE's list, other ways to reach a disk, a network or a process:
        "sqlite3",
        "shutil",
        "tempfile",
        "fcntl",
        "signal",
        "asyncio",
        "multiprocessing",
    }
)
FORBIDDEN_MEMSYNC = frozenset(f"memsync.{m}" for m in ("local", "hub", "daemon", "cli", "config"))
ALLOWED_MEMSYNC = ("memsync.core", "memsync.errors")
"""The only parts of memsync the core may import: itself and the exception leaf."""
FORBIDDEN_CALLS = frozenset({"open", "print", "input", "__import__"})
CLOCK_ATTRS = frozenset({"now", "utcnow", "today", "time", "time_ns", "monotonic"})


def _absolute(module: str | None, level: int, package: str) -> str:
    """The absolute name of a (possibly relative) `from ... import` in `package`."""
    if level == 0:
        return module or ""
    parts = package.split(".")
    base = parts[: len(parts) - level + 1]
    return ".".join([*base, module] if module else base)


def impure_imports(source: str, package: str = "memsync.core") -> list[str]:
    """Every forbidden module `source` imports (relative imports resolved in `package`)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            top = name.split(".")[0]
            shell = any(name == m or name.startswith(m + ".") for m in FORBIDDEN_MEMSYNC) or (
                top == "memsync"
                and name != "memsync"
                and not any(name == m or name.startswith(m + ".") for m in ALLOWED_MEMSYNC)
            )
            if top in FORBIDDEN_TOP or shell:
                found.append(name)
    return sorted(set(found))


def impure_calls(source: str) -> list[str]:
    """Calls that open files, print, or read the clock (`datetime.now()`, `time.time()`)."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in FORBIDDEN_CALLS:
            found.append(func.id)
        elif isinstance(func, ast.Attribute) and func.attr in CLOCK_ATTRS:
            found.append(ast.unparse(func))
    return found


CORE_FILES = sorted(CORE.glob("*.py"))


def test_the_core_modules_are_found() -> None:
    names = {p.name for p in CORE_FILES}
    assert {"__init__.py", "lines.py", "records.py", "timestamps.py", "view.py"} <= names


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: p.name)
def test_core_imports_nothing_impure(path: Path) -> None:
    """Guideline 2: core modules are functions of bytes and `now`."""
    assert impure_imports(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("path", CORE_FILES, ids=lambda p: p.name)
def test_core_never_opens_prints_or_reads_the_clock(path: Path) -> None:
    """Guideline 1: `now` is always a parameter; no file is opened in the core."""
    assert impure_calls(path.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize(
    "source",
    [
        "import os",
        "import os.path",
        "from os import path",
        "import logging.handlers",
        "from pathlib import Path",
        "import time as _t",
        "from filelock import FileLock",
        "from memsync import storage",
        "from memsync.local.storage import append_bytes",
        "from memsync.hub.transports.ssh import SSHTransport",
        "from .. import memfile",
        "from ..cli import main",
        "from ..lock import file_lock",
        "from memsync.local.fileindex import MergeIndex",
        "from memsync import config",
        "import sqlite3",
        "def f():\n    import subprocess",
    ],
)
def test_the_import_guard_catches(source: str) -> None:
    """The guard itself can fail: each of these is caught, in any spelling."""
    assert impure_imports(source) != []


@pytest.mark.parametrize(
    "source",
    [
        "import re",
        "import msgspec",
        "from datetime import UTC",
        "from memsync.errors import UnsupportedFormat",
        "from memsync.core.records import Record",
        "from .records import Record",
        "from . import timestamps",
        "import osmium",  # only the module `os` itself is forbidden, not a prefix
    ],
)
def test_the_import_guard_allows(source: str) -> None:
    assert impure_imports(source) == []


def test_the_call_guard_catches() -> None:
    assert impure_calls("datetime.now(UTC)") == ["datetime.now"]
    assert impure_calls("open('x')") == ["open"]
    assert impure_calls("time.time()") == ["time.time"]
    assert impure_calls("x = now + 1") == []


def test_all_is_sorted_and_complete() -> None:
    """Guideline 3: `memsync.__all__` is sorted and lists exactly the package's public
    names (submodules and `from __future__` features are not API; `__version__` is)."""
    assert memsync.__all__ == sorted(memsync.__all__)
    public = {
        name
        for name, value in vars(memsync).items()
        if not isinstance(value, types.ModuleType | __future__._Feature)
        and (not name.startswith("_") or name == "__version__")
    }
    public |= set(memsync._LAZY)  # imported on first use (PEP 562)
    assert set(memsync.__all__) == public
    assert len(memsync.__all__) == len(set(memsync.__all__))
    for name in memsync.__all__:
        assert getattr(memsync, name) is not None


def test_the_library_never_configures_logging(tmp_path: Path) -> None:
    """Guideline 10: library calls leave the "memsync" logger as they found it: level
    NOTSET, no handlers, propagating to the application's handlers."""
    logger = logging.getLogger("memsync")
    root = logging.getLogger()
    root_before = (list(root.handlers), root.level)
    assert logger.level == logging.NOTSET
    assert logger.handlers == []
    now = datetime(2026, 11, 1, tzinfo=UTC)
    mem = Memory.open(tmp_path / "m.jsonl", now=0)
    entry = mem.add("fact", "A fact.", now=now)
    mem.view(now=now)
    mem.check(now=now)
    mem.to_prompt(now=now)
    mem.forget(entry.id, now=now)
    with open(mem.path, "ab") as f:
        f.write(b"{bad line\n")
    mem.view(now=now)
    assert logger.level == logging.NOTSET
    assert logger.handlers == []
    assert logger.propagate
    assert (list(root.handlers), root.level) == root_before


# --- Layers (STYLE "Dependency direction": cli -> daemon -> hub -> local -> core) ----------

PACKAGE = Path(memsync.__file__).resolve().parent


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def memsync_imports(
    source: str, module: str, known: Collection[str], *, is_package: bool = False
) -> set[str]:
    """The memsync modules `source` (the module `module`) imports, anywhere in the file
    (lazy imports inside functions and `TYPE_CHECKING` blocks count too). `from a import b`
    names the module `a.b` when that is a module, else `a`."""
    package = module if is_package else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node.module, node.level, package)
            subs = [f"{base}.{alias.name}" for alias in node.names]
            names = [s for s in subs if s in known] or [base]
        for name in names:
            if name.split(".")[0] == "memsync":
                found.add(name)
    found.discard(module)
    return found


def import_graph() -> dict[str, set[str]]:
    """Every memsync module and the memsync modules it imports."""
    return {
        name: memsync_imports(
            path.read_text(encoding="utf-8"), name, MODULES, is_package=path.stem == "__init__"
        )
        for name, path in MODULES.items()
    }


def find_cycle(graph: Mapping[str, Collection[str]]) -> list[str] | None:
    """One import circle of `graph` as a path `[a, b, ..., a]`, or None when there is none."""
    WHITE, GREY, BLACK = 0, 1, 2
    colour = dict.fromkeys(graph, WHITE)
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        colour[node] = GREY
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in colour:
                continue
            if colour[nxt] == GREY:
                return [*stack[stack.index(nxt) :], nxt]
            if colour[nxt] == WHITE and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        colour[node] = BLACK
        return None

    for start in sorted(graph):
        if colour[start] == WHITE and (cycle := visit(start)):
            return cycle
    return None


def test_the_cycle_finder_finds_a_circle() -> None:
    """The guard can fail: a synthetic circle like the old memfile <-> compaction one."""
    graph = {
        "memsync.local.memory": {"memsync.local.compaction", "memsync.core.view"},
        "memsync.local.compaction": {"memsync.local.fresh", "memsync.local.memory"},
        "memsync.local.fresh": set(),
        "memsync.core.view": set(),
    }
    cycle = find_cycle(graph)
    assert cycle is not None
    assert cycle[0] == cycle[-1]
    assert set(cycle) == {"memsync.local.memory", "memsync.local.compaction"}
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a.b"}, "a.b": {"a"}}) == ["a", "a.b", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_import_graph_reads_imports() -> None:
    """The graph sees plain, relative, lazy and `TYPE_CHECKING` imports of memsync modules."""
    known = {"memsync.local.memory", "memsync.local.compaction", "memsync.local", "memsync.errors"}
    source = (
        "from typing import TYPE_CHECKING\n"
        "import memsync.errors\n"
        "if TYPE_CHECKING:\n    from memsync.local import compaction\n"
        "def f():\n    from .compaction import compact_file\n"
    )
    assert memsync_imports(source, "memsync.local.memory", known) == {
        "memsync.errors",
        "memsync.local.compaction",
    }


@pytest.mark.slow
def test_no_import_circles() -> None:
    """No memsync module imports itself through others, lazily or not (issue 9)."""
    assert find_cycle(import_graph()) is None


LAYER_RULES = {
    "memsync.core": ("memsync.local", "memsync.hub", "memsync.daemon", "memsync.cli"),
    "memsync.local": ("memsync.hub", "memsync.daemon", "memsync.cli", "memsync.config"),
    "memsync.hub": ("memsync.daemon", "memsync.cli", "memsync.config"),
    "memsync.config": ("memsync.daemon", "memsync.cli", "memsync.mcp_server"),
    "memsync.daemon": ("memsync.cli", "memsync.mcp_server"),
}
"""Each layer and what it must never import (nothing imports upward; the config is read
by the CLI, the daemon and the MCP server, and handed to the library through
`memsync.config.wiring`; the config never reaches up into the daemon or the CLI, and the
daemon never into the CLI)."""


def layer_violations(graph: Mapping[str, Collection[str]]) -> list[str]:
    """`"importer -> imported"` for every import that crosses a layer the wrong way."""
    found = []
    for module, imported in sorted(graph.items()):
        for layer, forbidden in LAYER_RULES.items():
            if module != layer and not module.startswith(layer + "."):
                continue
            found += [
                f"{module} -> {name}"
                for name in sorted(imported)
                if any(name == f or name.startswith(f + ".") for f in forbidden)
            ]
    return found


def test_the_layer_guard_catches() -> None:
    graph = {
        "memsync.local.merge": {"memsync.hub.sync", "memsync.core.merge"},
        "memsync.hub.sync": {"memsync.daemon"},
        "memsync.daemon": {"memsync.hub.sync"},
    }
    assert layer_violations(graph) == [
        "memsync.hub.sync -> memsync.daemon",
        "memsync.local.merge -> memsync.hub.sync",
    ]


@pytest.mark.slow
def test_layers_import_only_downward() -> None:
    """core <- local <- hub <- daemon <- cli: local never imports hub, daemon or cli; hub
    never imports daemon, cli or the config."""
    assert layer_violations(import_graph()) == []


def test_the_layer_guard_catches_the_shell() -> None:
    """The config never imports the daemon or the CLI; the daemon never the CLI."""
    graph = {
        "memsync.config.wiring": {"memsync.daemon.status", "memsync.hub.sync"},
        "memsync.daemon.service": {"memsync.cli._common", "memsync.config.wiring"},
    }
    assert layer_violations(graph) == [
        "memsync.config.wiring -> memsync.daemon.status",
        "memsync.daemon.service -> memsync.cli._common",
    ]


TOP_LEVEL_MODULES = frozenset({"errors", "models", "mcp_server"})
"""The loose modules at `memsync/`'s top level besides `__init__` and `__main__` (issue 19:
at most 4). Everything else lives in a room: core, local, hub, config, daemon, cli."""


def test_the_top_level_stays_small() -> None:
    loose = {
        path.stem for path in PACKAGE.glob("*.py") if path.stem not in ("__init__", "__main__")
    }
    assert loose == TOP_LEVEL_MODULES
    assert len(loose) <= 4


MAX_MODULE_LINES = 500
"""Issue 19: a module a reader takes in at one sitting. A module that outgrows it is split
by what its parts do, not at an arbitrary line."""


def test_no_module_is_over_500_lines() -> None:
    sizes = {
        name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in MODULES.items()
    }
    assert {n: s for n, s in sizes.items() if s > MAX_MODULE_LINES} == {}


def test_the_exception_leaf_imports_nothing_of_memsync() -> None:
    """`errors` is imported from everywhere, so it imports nothing of memsync (issue 19)."""
    assert import_graph()["memsync.errors"] == set()


def test_the_layers_are_found() -> None:
    assert {"memsync.core.merge", "memsync.local.memory", "memsync.hub.sync"} <= set(MODULES)


DOMAIN = frozenset(
    {
        "memsync.core.lines",
        "memsync.core.merge",
        "memsync.core.compaction",
        "memsync.local.compaction",
        "memsync.local.merge",
    }
)
"""Where lines are judged, merges planned and compactions sequenced: not the daemon's job."""


@pytest.mark.slow
def test_the_daemon_is_wiring_only() -> None:
    """STYLE guideline 6: the daemon validates no line and holds no compaction or merge
    sequence; `memsync compact` and its scheduled job call the same `compact_memory`."""
    graph = import_graph()
    daemon = [name for name in MODULES if name.startswith("memsync.daemon")]
    assert {"memsync.daemon", "memsync.daemon.service"} <= set(daemon)
    assert set().union(*(graph[name] for name in daemon)) & DOMAIN == set()
    source = "\n".join(MODULES[name].read_text(encoding="utf-8") for name in daemon)
    for name in ("classify", "compact_file", "compact_own_hub_file", "acknowledged_for"):
        assert name not in source
    assert "compact_memory(" in source
    assert "compact_memory(" in MODULES["memsync.cli._files"].read_text(encoding="utf-8")


def _all_of(path: Path) -> list[str] | None:
    """The names a module's `__all__` lists (read with `ast`: nothing is imported)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        target: ast.expr
        if isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == "__all__":
            names = ast.literal_eval(value)
            assert isinstance(names, list)
            return [str(n) for n in names]
    return None


def _defined(path: Path) -> tuple[set[str], set[str]]:
    """The top-level names a module binds, and the public functions and classes it defines."""
    bound: set[str] = set()
    public: set[str] = set()
    body = ast.parse(path.read_text(encoding="utf-8")).body
    # Names imported under `if TYPE_CHECKING:` count as bound: a package that imports its
    # API lazily (PEP 562 `__getattr__`, memsync/__init__.py) names them there for typing.
    for node in list(body):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            body.extend(node.body)
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            bound.add(node.name)
            if not node.name.startswith("_"):
                public.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names = t.elts if isinstance(t, ast.Tuple) else [t]
                bound.update(n.id for n in names if isinstance(n, ast.Name))
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
    return bound, public


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n in MODULES if not n.endswith("__main__")))
def test_modules_are_private_or_have_an_honest_all(name: str) -> None:
    """STYLE guideline 3: every module has an `__all__` (private `_modules` may skip it),
    listing only names it binds and every public function and class it defines."""
    path = MODULES[name]
    listed = _all_of(path)
    if listed is None:
        assert path.stem != "__init__", f"{name} has no __all__"
        assert path.stem.startswith("_"), f"{name} has no __all__"
        return
    bound, public = _defined(path)
    assert set(listed) <= bound, f"{name}.__all__ names what it does not bind"
    assert public <= set(listed), f"{name} defines public names outside __all__"


def test_the_everyday_commands_start_without_pydantic_sqlite_or_the_hub(tmp_path: Path) -> None:
    """Issue 14: `import memsync.cli`, and `memsync add`, `show`, `prompt` and `forget`,
    import only what they use: no pydantic, no SQLite, no paramiko, no hub."""
    memory = tmp_path / "me.jsonl"
    heavy = {"pydantic", "sqlite3", "paramiko", "memsync.hub.sync", "memsync.config"}
    found = modules_loaded(
        heavy,
        "def run(*argv):",
        "    try:",
        "        main(list(argv))",
        "    except SystemExit as exc:",
        "        assert not exc.code, exc.code",
        f"run('add', {str(memory)!r}, '--kind', 'fact', '--text', 'Builds need 3.11.')",
        f"run('show', {str(memory)!r})",
        f"run('prompt', {str(memory)!r})",
    )
    assert found == []


def test_add_starts_without_the_view(tmp_path: Path) -> None:
    """Issue 20: `memsync add` (and `forget`) import only what appending needs: not the
    view (`core.view`), the located scan, the drain's reading side or the other commands
    (nor the modules that only register other commands' parsers), nor filelock: the lock
    takes its `flock` itself (`memsync.local.lock`); nor `secrets`, `hashlib` or
    `subprocess`, which only other paths need; nor `dataclasses`: each frozen dataclass
    costs about 0.5 ms to create, a `msgspec.Struct` a few microseconds; nor `logging`
    (about 4 ms), which `memsync.local.logs` imports only when something is logged; nor
    `typing_extensions` and `inspect` (msgspec's optional import, `memsync/__init__`), nor
    argparse (a plain line is parsed by `memsync.cli._quickargs`)."""
    memory = tmp_path / "me.jsonl"
    heavy = {
        "memsync.core.view", "memsync.core.compaction", "memsync.core.prompt",
        "memsync.local.located", "memsync.local.reading", "memsync.cli._files",
        "memsync.cli._hubs", "memsync.cli._agents", "memsync.cli._bridges",
        "memsync.cli._keys", "memsync.cli._git", "sqlite3", "pydantic", "filelock",
        "subprocess", "secrets", "hashlib", "dataclasses", "logging",
        "typing_extensions", "inspect", "argparse",
    }  # fmt: skip
    add = f"assert main(['add', {str(memory)!r}, '--kind', 'fact', '--text', 'x']) == 0"
    assert modules_loaded(heavy, add) == []


def test_prompt_from_a_warm_store_starts_without_the_fold(tmp_path: Path) -> None:
    """Issue 20: `memsync prompt --max-chars N` answered by the persistent view's quick part
    imports neither the fold (the located scan, the drain, `local.reading`, even to fold
    the lines appended since) nor the other commands' modules (`cli._files`), nor SQLite,
    pydantic, filelock, logging, `inspect` or argparse."""
    memory = large_memory(tmp_path / "me.jsonl")
    heavy = {
        "memsync.local.located", "memsync.local.drain", "memsync.cli._files",
        "memsync.cli._agents", "sqlite3", "pydantic", "filelock", "hashlib",
        "logging", "threading", "memsync.local.reading", "typing_extensions", "inspect",
        "argparse",
    }  # fmt: skip
    run = f"assert main(['prompt', {str(memory)!r}, '--max-chars', '4000']) == 0"
    assert "memsync.local.located" in modules_loaded(heavy, run)  # the first one builds the store
    with memory.open("a") as f:  # a line the quick part folds (as after an `add`)
        f.write(
            '{"id": "new", "kind": "fact", "text": "New.", "created_at": "2026-01-02T00:00:00Z"}\n'
        )
    assert modules_loaded(heavy, run) == []


TESTS = Path(__file__).resolve().parent


@pytest.mark.slow
def test_only_helpers_are_imported_across_test_modules() -> None:
    """Test modules share code through `tests/helpers` and fixtures, never by importing
    another test module (issue 19, item 7): a variant (encrypted, S3) is a fixture
    parameter, not a file that re-exports another file's tests."""
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if "helpers" in path.relative_to(TESTS).parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for name in names:
                parts = name.split(".")
                if parts[0] == "tests" and any(p.startswith(("test_", "conftest")) for p in parts):
                    offenders.append(f"{path.relative_to(TESTS)} imports {name}")
                if parts[0] == "tests" and len(parts) >= 2 and parts[1] != "helpers":
                    sub = TESTS.joinpath(*parts[1:])
                    if sub.is_dir() or sub.with_suffix(".py").exists():
                        offenders.append(f"{path.relative_to(TESTS)} imports {name}")
    assert sorted(set(offenders)) == []


def _private_imports(source: str) -> list[str]:
    """The private names (`_x`, not `__x__`) a module imports from memsync modules."""
    return [
        f"{node.module}.{alias.name}"
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memsync")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]


def test_the_private_import_finder_finds_one() -> None:
    source = "from memsync.hub._pass import _SUFFIX, PassContext\nfrom memsync.hub import _pass\n"
    found = _private_imports(source)
    assert found == ["memsync.hub._pass._SUFFIX", "memsync.hub._pass"]
    assert [n for n in found if n not in MODULES] == ["memsync.hub._pass._SUFFIX"]


def test_the_sync_pass_imports_nothing_private() -> None:
    """Issue 19, item 4: the pass's modules share public names only (a private module,
    `_pass`, may hold them); what one imports from another is their interface."""
    hub = [name for name in MODULES if name.startswith("memsync.hub.") and name.count(".") == 2]
    assert {"memsync.hub.sync", "memsync.hub.push", "memsync.hub._pass"} <= set(hub)
    found = {
        name: names
        for name in hub
        # A private module may be imported (`from memsync.daemon import _systemd`).
        if (names := [n for n in _private_imports(MODULES[name].read_text()) if n not in MODULES])
    }
    assert found == {}


def test_recall_starts_without_openssl_or_json(tmp_path: Path) -> None:
    """Issue 20: `memsync recall` of a file with a persistent view and a recall index
    imports neither `hashlib` (OpenSSL, about 3 ms: its index's name takes the built-in
    SHA-256) nor `json` (only `--json` prints it), nor `threading` (its locks are
    `_thread`'s) or `logging`, nor the fold or the other commands' modules, nor `inspect`
    or argparse."""
    memory = large_memory(tmp_path / "me.jsonl", "Retry")
    warm = f"main(['prompt', {str(memory)!r}]); main(['recall', {str(memory)!r}, 'retry'])"
    subprocess.run(
        [sys.executable, "-c", f"from memsync.cli import main; {warm}"],
        stdout=subprocess.DEVNULL,
        check=True,
    )
    heavy = {
        "hashlib", "json", "memsync.cli._files", "memsync.local.located",
        "memsync.local.drain", "pydantic", "filelock", "logging", "threading",
        "typing_extensions", "inspect", "argparse",
    }  # fmt: skip
    assert modules_loaded(heavy, f"assert main(['recall', {str(memory)!r}, 'retry']) == 0") == []


def test_the_recall_index_name_is_the_sha256_of_the_path(tmp_path: Path) -> None:
    """The built-in SHA-256 `StateDir.recall_index` uses names the index as `hashlib` did:
    an index built before is found again."""
    from memsync.local.statedir import StateDir

    memory = tmp_path / "me.jsonl"
    key = hashlib.sha256(str(memory.resolve()).encode()).hexdigest()[:16]
    assert StateDir(tmp_path / "state").recall_index(memory).name == f"me.jsonl-{key}.sqlite"
