"""`memsync mcp`: one memory file served over the Model Context Protocol (the `mcp` SDK 2.x).

Importing this module imports the SDK, so only the `mcp` subcommand imports it (the other
commands must not pay its start-up time; `tests/test_mcp.py` checks it).

Tools (typed inputs, structured outputs): `remember`, `supersede`, `forget`, `recall`.
Resource `memsync://<memory>/prompt/<scope>` and prompt `memory`: the `to_prompt` block.
Writes are `Memory.add`/`forget`, appends of whole lines under the file's lock (SEMANTICS
rule 13), so several servers, the daemon and the CLI may write the same file at once.
Every reply is bounded: `max_chars` (default 20,000 characters, about 5,000 tokens) caps
the entries of a `recall` reply and the prompt block, far under the 25,000-token cap of
common hosts, whatever the size of the memory.
"""

from __future__ import annotations

import gc
import ipaddress
import json
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import quote

import msgspec
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError, UnexpectedToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from memsync.core.render import json_text, md_code, md_text
from memsync.core.timestamps import format_ts
from memsync.errors import MemsyncError
from memsync.local.fulltext import recall_live, warm
from memsync.local.livequick import live_quick
from memsync.local.logs import get_logger
from memsync.local.memory import Memory
from memsync.local.statedir import StateDir
from memsync.local.targets import require_memory_target
from memsync.local.viewstore import ViewStore

__all__ = [
    "DEFAULT_MAX_CHARS",
    "MAX_LIMIT",
    "Confidence",
    "Forgotten",
    "Hit",
    "Kind",
    "Recalled",
    "Remembered",
    "build_server",
    "check_host",
    "readable",
    "serve",
    "start",
]

DEFAULT_MAX_CHARS = 20_000
"""The default bound of a reply's entries: 20,000 characters is about 5,000 tokens."""

MAX_LIMIT = 200

Kind = Literal["preference", "lesson", "fact", "source", "avoid"]
Confidence = Annotated[float, Field(ge=0.0, le=1.0, description="from 0 to 1")]


class Remembered(BaseModel):
    """What `remember` and `supersede` wrote."""

    id: str = Field(description="the new entry's id")
    created_at: str
    supersedes: str | None = None


class Forgotten(BaseModel):
    """The tombstone `forget` wrote."""

    id: str
    created_at: str


class Hit(BaseModel):
    """One live entry found by `recall`."""

    id: str
    kind: Kind
    text: str
    scope: str
    tags: list[str]
    confidence: float
    source: str | None
    created_at: str
    score: float


class Recalled(BaseModel):
    """The ranked live entries matching a query, best first."""

    entries: list[Hit]
    truncated: bool = Field(description="true when max_chars cut entries or a text short")


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse to listen on anything but a loopback address unless `allow_remote`: the
    server has no authentication, and a memory file is personal.

    Raises:
        MemsyncError: a non-loopback `host` without `allow_remote`.
    """
    if allow_remote:
        return
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise MemsyncError(
            f"refusing to listen on {host!r}: the MCP server has no authentication; "
            "use 127.0.0.1, or pass --allow-remote to expose the memory to the network"
        )


def _ok(model: BaseModel, text: str | None = None) -> CallToolResult:
    data = model.model_dump(mode="json")
    body = text if text is not None else json_text(json.dumps(data, ensure_ascii=False))
    return CallToolResult(content=[TextContent(type="text", text=body)], structured_content=data)


def _refused(exc: Exception) -> CallToolResult:
    """memsync's own one-line message, as a tool error the model can read and act on."""
    return CallToolResult(content=[TextContent(type="text", text=f"memsync: {exc}")], is_error=True)


def readable(tool: str, exc: ValidationError) -> str:
    """A tool call's schema errors as one sentence a model can act on (issue 24, item 16),
    instead of pydantic's multi-line dump with its URLs: `memsync: remember: kind should
    be 'preference', ... or 'avoid'; text is required`. The rejected values are not
    repeated (they are the caller's text, possibly a secret)."""
    parts = []
    for err in exc.errors(include_url=False):
        where = "".join(
            f"[{p}]" if isinstance(p, int) else (f".{p}" if i else str(p))
            for i, p in enumerate(err["loc"])
        )
        message = str(err["msg"]).replace("\n", " ")
        if err["type"] == "missing":
            message = "is required"
        elif message.startswith("Input should"):
            message = "should" + message[len("Input should") :]
        parts.append(f"{where or 'the arguments'} {message}")
    return f"memsync: {tool}: {'; '.join(parts)} (see the tool's input schema)"


class _Server(MCPServer):
    """The SDK's server, with schema errors in one readable sentence (`readable`)."""

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(readable(name, exc.__cause__)) from exc.__cause__
            raise


def _bounded(hits: list[Hit], max_chars: int) -> tuple[list[Hit], bool]:
    """The first hits whose JSON fits in `max_chars`; a single hit too long on its own
    has its text cut (marked with "…") rather than the reply coming back empty."""
    kept: list[Hit] = []
    used = 0
    for hit in hits:
        # As json.dumps spells it (spaces after separators): the longest of the spellings.
        size = len(json.dumps(hit.model_dump(mode="json"), ensure_ascii=False)) + 2
        if used + size > max_chars:
            room = max_chars - used - (size - len(hit.text)) - 1
            if not kept and room > 0:
                kept.append(hit.model_copy(update={"text": hit.text[:room] + "…"}))
            return kept, True
        kept.append(hit)
        used += size
    return kept, False


def _hit_line(hit: Hit) -> str:
    """One hit as one Markdown list item of the reply's text (SEMANTICS rule 17): the id
    in a code span, then memsync's words (the kind, and "said by the person" for an entry
    whose source is "user"), then the scope and the text, escaped, so no record string can
    start another item, a heading, a link or an image, or pass for the person's words."""
    who = ", said by the person" if hit.source == "user" else ""
    return f"- {md_code(hit.id)} {hit.kind}{who} ({md_text(hit.scope)}): {md_text(hit.text)}"


def build_server(
    path: Path, name: str, state_dir: StateDir | None = None, refused: Iterable[str] = ()
) -> MCPServer:
    """An MCP server for memory file `path` (created if missing), named `name` in its
    resource URIs. The recall index lives in `state_dir` (default: memsync's); `remember`
    and `supersede` refuse any text holding one of `refused` (this machine's hub keys)."""
    require_memory_target(path)  # never JSON appended to notes.txt (issue 24, item 6)
    mem = Memory.open(path, refused=refused)
    store = ViewStore(StateDir.of(state_dir))
    # The prompt, and supersede's and forget's questions about one id, come from the
    # file's quick part in the state directory (issue 20), held between calls: a call
    # after an append reads what was appended and the lines it shows, and the server holds
    # no view of every id. Recall checks its candidates against the same quick part.
    view = live_quick(mem.path, store)
    # The SDK runs sync tools in worker threads; one lock keeps this process's writes and
    # index refreshes in order (other processes are kept in order by the file's lock).
    lock = threading.Lock()
    server: MCPServer = _Server(
        name="memsync",
        instructions=(
            f"Long-term memory '{name}' shared by this person's agents and machines. Call "
            "recall before a task to find what is known; remember durable preferences, "
            "lessons and facts (never secrets); forget or supersede what turned out wrong."
        ),
        log_level="WARNING",
    )

    @server.tool(
        annotations=ToolAnnotations(
            title="Remember", read_only_hint=False, destructive_hint=False, idempotent_hint=False
        ),
    )
    def remember(
        kind: Kind,
        text: Annotated[str, Field(min_length=1, description="one self-contained statement")],
        scope: Annotated[
            str, Field(description='"global", a domain, or "project:<name>"')
        ] = "global",
        tags: list[str] | None = None,
        confidence: Confidence = 1.0,
        source: Annotated[
            str | None, Field(description='where it was learned; "user" if the person said it')
        ] = None,
    ) -> Annotated[CallToolResult, Remembered]:
        """Store a new memory entry and return its id. Secrets are refused."""
        try:
            with lock:
                e = mem.add(
                    kind, text, scope=scope, tags=tags or (), confidence=confidence, source=source
                )
        except MemsyncError as exc:
            return _refused(exc)
        return _ok(Remembered(id=e.id, created_at=format_ts(_us(e.created_at))))

    @server.tool(
        annotations=ToolAnnotations(
            title="Supersede", read_only_hint=False, destructive_hint=True, idempotent_hint=False
        ),
    )
    def supersede(
        id: str,
        text: Annotated[str, Field(min_length=1)],
        kind: Kind | None = None,
        scope: str | None = None,
        tags: list[str] | None = None,
        confidence: Confidence | None = None,
        source: Annotated[
            str | None,
            Field(description='"user" if the person said the correction; default: the old one\'s'),
        ] = None,
    ) -> Annotated[CallToolResult, Remembered]:
        """Replace entry `id` for good with a corrected one (SEMANTICS rule 10); `kind`,
        `scope`, `tags`, `confidence` and `source` default to the old entry's. An entry the
        person said (source "user") is replaced only by one they said too: pass source
        "user" (it is never carried over unasked)."""
        try:
            with lock:
                old = view.current(id)
                was: dict[str, Any] = msgspec.json.decode(old.raw) if old is not None else {}
                # Carry the old entry's source, except the person's: rule 10 would ignore an
                # inferred supersession of it, and `Memory.supersede` refuses it with the
                # reason; claiming the person said the correction is the caller's call.
                carried = was.get("source") if was.get("source") != "user" else None
                e = mem.supersede_version(
                    old,
                    id,
                    text,
                    kind=kind,
                    scope=scope if scope is not None else was.get("scope", "global"),
                    tags=tags if tags is not None else was.get("tags", []),
                    confidence=confidence if confidence is not None else was.get("confidence", 1.0),
                    source=source if source is not None else carried,
                )
        except MemsyncError as exc:
            return _refused(exc)
        return _ok(Remembered(id=e.id, created_at=format_ts(_us(e.created_at)), supersedes=id))

    @server.tool(
        annotations=ToolAnnotations(
            title="Forget", read_only_hint=False, destructive_hint=True, idempotent_hint=True
        ),
    )
    def forget(id: str) -> Annotated[CallToolResult, Forgotten]:
        """Delete entry `id` on every machine (a tombstone that syncs)."""
        try:
            with lock:
                t = mem.forget_record(id, known=view.newest(id))
        except MemsyncError as exc:
            return _refused(exc)
        return _ok(Forgotten(id=t.id, created_at=format_ts(t.ts)))

    @server.tool(
        name="recall",
        annotations=ToolAnnotations(title="Recall", read_only_hint=True, open_world_hint=False),
    )
    def recall_tool(
        query: Annotated[str, Field(description="words to look for (stemmed: retries ~ retry)")],
        scope: Annotated[
            str | None, Field(description="the task's scope; global entries always match")
        ] = None,
        kinds: list[Kind] | None = None,
        min_confidence: Confidence = 0.0,
        limit: Annotated[int, Field(ge=1, le=MAX_LIMIT)] = 10,
        max_chars: Annotated[int, Field(ge=200, le=80_000)] = DEFAULT_MAX_CHARS,
    ) -> Annotated[CallToolResult, Recalled]:
        """Live entries matching the query, best first; never forgotten, superseded or
        expired ones. The reply holds at most `limit` entries and `max_chars` characters."""
        try:
            with lock:
                found = recall_live(
                    view,
                    query,
                    scope=scope,
                    kinds=kinds or (),
                    min_confidence=min_confidence,
                    limit=limit,
                    state_dir=state_dir,
                )
        except (MemsyncError, OSError) as exc:
            return _refused(exc)
        hits = [Hit.model_validate(h.to_json()) for h in found]
        kept, truncated = _bounded(hits, max_chars)
        lines = [_hit_line(h) for h in kept]
        text = "\n".join(lines) if lines else "no live entry matches"
        return _ok(Recalled(entries=kept, truncated=truncated), text)

    # The memory's name is a file's stem ("my memory", "a{b}", "a#b?c"): percent-encoded in
    # the URIs (RFC 3986), so that they are valid and a brace is no template parameter
    # (issue 24, item 14: `memsync mcp 'a{b}.jsonl'` died at start).
    where = quote(name, safe="")

    def _prompt_block(scope: str | None, max_chars: int) -> str:
        # Rendered again only when the file changed (LiveQuick.prompt): the resource and
        # the prompt on an unchanged file cost nothing the second time.
        return view.prompt(scope, max_chars, markdown=True)

    @server.resource(
        f"memsync://{where}/prompt/{{scope}}",
        name="memory-prompt",
        description="The memory block for a task in a scope (global entries included)",
        mime_type="text/markdown",
    )
    def prompt_resource(scope: str) -> str:
        try:
            return _prompt_block(None if scope == "global" else scope, DEFAULT_MAX_CHARS)
        except (MemsyncError, OSError) as exc:
            raise ResourceError(f"memsync: {exc}") from exc

    @server.resource(
        f"memsync://{where}/prompt/global",
        name="memory-prompt-global",
        description="The memory block of the global entries (listed for hosts without templates)",
        mime_type="text/markdown",
    )
    def global_prompt_resource() -> str:
        try:
            return _prompt_block(None, DEFAULT_MAX_CHARS)
        except (MemsyncError, OSError) as exc:
            raise ResourceError(f"memsync: {exc}") from exc

    @server.prompt(name="memory", description="What is known for a task in a scope")
    def memory_prompt(scope: str | None = None) -> str:
        block = _prompt_block(scope, DEFAULT_MAX_CHARS)
        return (
            f"What the memory '{name}' holds for this task:\n\n{block}"
            if block
            else f"The memory '{name}' holds nothing for this task yet."
        )

    _ = (remember, supersede, forget, recall_tool, prompt_resource, global_prompt_resource)
    _ = memory_prompt
    return server


def _warm(path: Path, state_dir: StateDir | None) -> None:
    try:
        # First the quick part opened (its digest checked once; on a cold file the store
        # written by another process: `LiveQuick._rewrite`) and the global block rendered,
        # then the recall index, which then finds the store; then every block of the
        # quick part checked, which the first calls would check as they read them.
        view = live_quick(path, ViewStore(StateDir.of(state_dir)))
        view.prompt(None, DEFAULT_MAX_CHARS, markdown=True)
        warm(path, state_dir)
        view.check_all()
    except (MemsyncError, OSError, sqlite3.Error) as exc:  # the first call will say why
        get_logger("memsync.mcp_server").warning(
            "could not warm the recall index or the view: %s", exc
        )


def _us(ts: Any) -> int:
    from memsync.core.timestamps import from_datetime

    return from_datetime(ts)


def start(
    path: Path, name: str, state_dir: StateDir | None = None, refused: Iterable[str] = ()
) -> MCPServer:
    """`build_server`, and the file read, the recall index built and the quick part opened
    in a thread while the host starts up: tools called meanwhile wait on the caches'
    locks, never see a half-built index."""
    server = build_server(path, name, state_dir, refused)
    _long_lived()
    threading.Thread(target=_warm, args=(path, state_dir), daemon=True).start()
    return server


def _long_lived() -> None:
    """The objects alive once the server is built (the modules of the SDK, pydantic and
    memsync, the server: some 90,000 objects, alive until the process ends) put out of
    the garbage collector's reach (`gc.freeze`), after a collection (no garbage kept for
    good). Else every full collection walks them all: at 1M records one call in about
    ten paused 20 to 45 ms (issue 20's MCP target: each call under 20 ms at p99); the
    full collections now walk what the calls allocated since, about 2 ms."""
    gc.collect()
    gc.freeze()


def serve(
    path: Path, name: str, state_dir: StateDir | None = None, refused: Iterable[str] = ()
) -> None:
    """Serve memory file `path` over stdio (what agent hosts launch). Streamable HTTP is
    `memsync.cli._mcp_http.serve_http(lambda: start(...), ...)`, with its Host and Origin
    checks."""
    start(path, name, state_dir, refused).run("stdio")
