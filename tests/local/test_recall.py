"""Recall by full-text search (`memsync.local.fulltext`): ranking, stemming, the view's filter
(SEMANTICS rules 8 to 11), the incremental index, the cached view, the fallback scan, the
CLI."""

from __future__ import annotations

import json
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memsync import Memory, recall
from memsync.cli import main
from memsync.local import textindex
from memsync.local.compaction import compact_file
from memsync.local.fulltext import TextIndex, fts5_available, live_cache, recall_live
from memsync.local.livequick import LiveQuick
from memsync.local.located import located_index
from memsync.local.merge import merge_files
from memsync.local.statedir import StateDir
from memsync.local.viewstore import ViewStore
from tests.helpers.examples import examples

pytestmark = pytest.mark.skipif(not fts5_available(), reason="this SQLite has no FTS5")

FIXTURE = {
    "mirror": (
        "lesson",
        "When the package mirror times out, retry with exponential backoff.",
        "global",
    ),
    "limit": ("lesson", "Retries without a limit hid a broken credential for a day.", "project:ci"),
    "short": ("preference", "The person prefers short answers without preamble.", "global"),
    "cores": ("fact", "The CI machine has two cores shared with other jobs.", "project:ci"),
    "push": ("avoid", "Never force-push to main; the mirror rejects it.", "github.com"),
    "deploy": ("fact", "Deploys go through the staging cluster first.", "project:web"),
    "fts": ("source", "The SQLite FTS5 documentation explains bm25 ranking.", "global"),
}


def _fixture(path: Path) -> dict[str, str]:
    mem = Memory.open(path)
    return {key: mem.add(k, text, scope=scope).id for key, (k, text, scope) in FIXTURE.items()}


def _ids(path: Path, query: str, state: Path, **kw: object) -> list[str]:
    return [h.id for h in recall(path, query, state_dir=state, **kw)]  # type: ignore[arg-type]


def test_expected_top_results(tmp_path: Path) -> None:
    path, state = tmp_path / "m.jsonl", tmp_path / "state"
    ids = _fixture(path)
    assert _ids(path, "mirror timeout", state)[0] == ids["mirror"]
    assert _ids(path, "short answers", state) == [ids["short"]]
    assert _ids(path, "force push", state) == [ids["push"]]
    assert _ids(path, "bm25", state) == [ids["fts"]]
    assert _ids(path, "nothing matches this", state) == []
    assert _ids(path, "", state) == []


def test_stemming_retries_finds_retry(tmp_path: Path) -> None:
    path, state = tmp_path / "m.jsonl", tmp_path / "state"
    ids = _fixture(path)
    assert set(_ids(path, "retries", state)) == {ids["mirror"], ids["limit"]}
    assert set(_ids(path, "retrying", state)) == {ids["mirror"], ids["limit"]}
    assert _ids(path, "deploying", state) == [ids["deploy"]]


def test_filters_scope_kind_confidence_limit(tmp_path: Path) -> None:
    path, state = tmp_path / "m.jsonl", tmp_path / "state"
    ids = _fixture(path)
    Memory(path).add("fact", "A retry fact of low confidence.", confidence=0.2)
    both = {ids["mirror"], ids["limit"]}
    assert set(_ids(path, "retry", state, kinds=["lesson"], scope="project:ci")) == both
    assert ids["limit"] not in _ids(path, "retry", state, scope="project:web")
    assert len(_ids(path, "retry", state)) == 3
    assert len(_ids(path, "retry", state, min_confidence=0.5)) == 2
    assert len(_ids(path, "retry", state, limit=1)) == 1
    assert _ids(path, "mirror", state, scope="api.github.com") == [
        h for h in _ids(path, "mirror", state) if h in {ids["mirror"], ids["push"]}
    ]


def test_forgotten_superseded_expired_and_old_versions_never_return(tmp_path: Path) -> None:
    path, state = tmp_path / "m.jsonl", tmp_path / "state"
    mem = Memory.open(path)
    gone = mem.add("fact", "The flaky runner is called zebra.")
    old = mem.add("fact", "The zebra runner has 8 GB.")
    new = mem.supersede(old.id, "The zebra runner has 16 GB.")
    soon = datetime.now(UTC) + timedelta(seconds=1)
    past = datetime.now(UTC) - timedelta(seconds=1)
    expired = mem.add("fact", "The zebra runner is down today.", expires_at=past)
    later = mem.add("fact", "The zebra runner reboots at noon.", expires_at=soon)
    assert set(_ids(path, "zebra", state)) == {gone.id, new.id, later.id}
    mem.forget(gone.id)
    assert set(_ids(path, "zebra", state)) == {new.id, later.id}
    assert expired.id not in _ids(path, "zebra", state)
    at = int((soon + timedelta(seconds=1)).timestamp() * 1_000_000)
    assert _ids(path, "zebra", state, now=at) == [new.id]
    # A later version of an id is found by its own words, not by its older version's.
    with path.open("ab") as f:
        f.write(
            json.dumps(
                {
                    "id": new.id,
                    "kind": "fact",
                    "text": "The okapi runner replaced it.",
                    "created_at": "2099-01-01T00:00:00Z",
                }
            ).encode()
            + b"\n"
        )
    far = int(datetime(2099, 6, 1, tzinfo=UTC).timestamp() * 1_000_000)
    assert _ids(path, "okapi", state, now=far) == [new.id]
    assert new.id not in _ids(path, "zebra", state, now=far)


def test_the_fallback_scan_keeps_the_contract(tmp_path: Path) -> None:
    path, state = tmp_path / "m.jsonl", tmp_path / "state"
    ids = _fixture(path)
    Memory(path).forget(ids["mirror"])
    for query in ["retries", "short answers", "force push", "deploying", "zzz"]:
        fts = recall(path, query, state_dir=state)
        scan = recall(path, query, state_dir=state, use_fts=False)
        assert {h.id for h in fts} == {h.id for h in scan}, query
        assert [type(h) for h in fts] == [type(h) for h in scan]
    assert _ids(path, "retries", state, use_fts=False) == [ids["limit"]]


@pytest.mark.parametrize("persistent", [False, True])
def test_an_unusable_state_directory_recalls_by_the_scan(
    tmp_path: Path, persistent: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The index is a cache: where the state directory cannot hold it (here a file stands
    where its folder would be; the same for one not writable, or full), recall answers as
    the fallback scan does, with a warning naming the index, instead of failing."""
    path = tmp_path / "m.jsonl"
    ids = _fixture(path)
    blocked = tmp_path / "state"
    blocked.write_text("not a folder")
    with caplog.at_level("WARNING", logger="memsync"):
        hits = recall(path, "retries", state_dir=blocked / "x", persistent=persistent)
    assert [h.id for h in hits] == _ids(path, "retries", tmp_path / "ok", use_fts=False)
    assert ids["limit"] in [h.id for h in hits]
    assert "recall without its full-text index" in caplog.text
    assert str(blocked) in caplog.text


def test_the_cli_recalls_through_an_unusable_state_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "m.jsonl"
    ids = _fixture(path)
    (tmp_path / "state").write_text("not a folder")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert main(["recall", str(path), "short"]) == 0
    assert capsys.readouterr().out.startswith(ids["short"])


def test_the_index_reads_only_new_lines_and_rebuilds_when_rewritten(tmp_path: Path) -> None:
    path, state = tmp_path / "m.jsonl", tmp_path / "state"
    _fixture(path)
    with TextIndex(path, StateDir(state).recall_index(path)) as index:
        assert index.refresh() == path.stat().st_size
        assert index.refresh() == 0
        size = path.stat().st_size
        Memory(path).add("fact", "One more line.")
        assert index.refresh() == path.stat().st_size - size
        # The same bytes count, other content (an in-place rewrite): rebuilt from the start.
        data = path.read_bytes().replace(b"One more line.", b"One more LINE.")
        with path.open("r+b") as f:
            f.write(data)
        assert index.refresh() == len(data)
        assert any("LINE" in body for _, _, body in index.rows())
        # A compaction writes a new file (new inode, new generation): rebuilt too.
        Memory(path).forget(Memory(path).view().records[0].id)
        result = compact_file(path, quiet_seconds=0, horizon_days=0, grace_seconds=0)
        assert result.rewritten
        assert index.refresh() == path.stat().st_size
        assert len(index.rows()) == len(FIXTURE)
    assert oct(StateDir(state).recall_index(path).stat().st_mode & 0o777) == "0o600"
    assert oct(StateDir(state).recall_index(path).parent.stat().st_mode & 0o777) == "0o700"


def test_the_view_cache_does_not_reread_an_unchanged_file(tmp_path: Path) -> None:
    path, state = tmp_path / "m.jsonl", tmp_path / "state"
    _fixture(path)
    cache = live_cache(path)
    recall(path, "retry", state_dir=state)
    read = cache.bytes_read
    assert read == path.stat().st_size
    recall(path, "retry", state_dir=state)
    cache.live()
    assert cache.bytes_read == read
    size = path.stat().st_size
    Memory(path).add("fact", "Grown by one line.")
    recall(path, "grown", state_dir=state)
    assert cache.bytes_read == read + path.stat().st_size - size


_WORDS = ["retry", "mirror", "deploy", "cache", "zebra", "okapi", "backoff", "cluster"]


@st.composite
def _ops(draw: st.DrawFn) -> list[tuple[str, int, str]]:
    n = draw(st.integers(1, 12))
    ops = []
    for _ in range(n):
        op = draw(st.sampled_from(["add", "add", "forget", "supersede", "merge", "compact"]))
        text = " ".join(draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4)))
        ops.append((op, draw(st.integers(0, 50)), text))
    return ops


@pytest.mark.slow
@settings(max_examples=examples(0.25))
@given(ops=_ops())
def test_the_incremental_index_equals_a_rebuilt_one(ops: list[tuple[str, int, str]]) -> None:
    """After random appends, forgets, supersessions, merges and compactions, the index
    refreshed after each step holds exactly the rows of one built from scratch, and
    recall answers the same through both."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path, other = root / "m.jsonl", root / "other.jsonl"
        mem = Memory.open(path)
        live: list[str] = []
        with TextIndex(path, root / "incremental.sqlite") as inc:
            for op, n, text in ops:
                if op == "add" or (op in {"forget", "supersede"} and not live):
                    live.append(mem.add("fact", text).id)
                elif op == "forget":
                    mem.forget(live.pop(n % len(live)))
                elif op == "supersede":
                    live.append(mem.supersede(live.pop(n % len(live)), text).id)
                elif op == "merge":
                    src = Memory.open(other)
                    src.add("lesson", text)
                    merge_files(path, [other])
                else:
                    compact_file(path, quiet_seconds=0, horizon_days=0, grace_seconds=0)
                inc.refresh()
            with TextIndex(path, root / "rebuilt.sqlite") as fresh:
                fresh.refresh()
                assert inc.rows() == fresh.rows()
                for word in _WORDS[:3]:
                    assert [c[:2] for c in inc.candidates(word)] == [
                        c[:2] for c in fresh.candidates(word)
                    ]


def test_cli_recall(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.jsonl"
    ids = _fixture(path)
    assert main(["recall", str(path), "retries", "--kind", "lesson", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {h["id"] for h in out} == {ids["mirror"], ids["limit"]}
    assert set(out[0]) >= {"id", "kind", "text", "scope", "tags", "confidence", "score"}
    assert main(["recall", str(path), "short", "--limit", "1"]) == 0
    assert capsys.readouterr().out.startswith(ids["short"])
    assert main(["recall", str(tmp_path / "missing.jsonl"), "x"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memsync: ")
    assert "missing.jsonl" in err
    assert err.count("\n") == 1
    assert main(["recall", str(path), "x", "--limit", "0"]) == 2


def test_each_live_entry_once_matched_on_its_current_version(tmp_path: Path) -> None:
    """Issue 24, item 10: after a rule-14 repeat (a merge appends the winning line again)
    recall returned the entry twice, using up the limit; a query matching only a beaten
    twin's text returned the winner, whose text does not hold the word."""
    path, state = tmp_path / "m.jsonl", tmp_path / "state"

    def line(rid: str, text: str) -> bytes:
        obj = {"id": rid, "kind": "fact", "text": text, "created_at": "2026-01-01T00:00:00Z"}
        return json.dumps(obj).encode() + b"\n"

    header = b'{"format": "agent-memory/0.1", "created_at": "2026-01-01T00:00:00Z"}\n'
    repeated = line("a1", "deploys use staging")
    # Twins (rule 9): the greater canonical JSON wins, the text "the winner says blue".
    twins = line("t1", "the loser says zebra") + line("t1", "the winner says blue")
    path.write_bytes(header + repeated + line("b2", "staging is slow") + repeated + twins)
    for use_fts in (True, False):
        hits = recall(path, "staging", state_dir=state, use_fts=use_fts)
        assert sorted(h.id for h in hits) == ["a1", "b2"], use_fts
        assert [h.id for h in recall(path, "staging", state_dir=state, limit=2)] != ["a1", "a1"]
        assert recall(path, "zebra", state_dir=state, use_fts=use_fts) == [], use_fts
        [hit] = recall(path, "blue", state_dir=state, use_fts=use_fts)
        assert hit.text == "the winner says blue"


def test_a_common_word_is_ranked_a_window_of_its_latest_lines_at_a_time(tmp_path: Path) -> None:
    """A word held by more than `common` lines: its `common` latest lines come first, best
    first among them, then the older ones; a rare word of the same query comes before it;
    every matching line comes at last. Under the cap, every line is ranked at once."""
    path = tmp_path / "m.jsonl"
    mem = Memory.open(path)
    best = mem.add("fact", "retry retry retry").id  # the best BM25 match, and the oldest
    zebra = mem.add("fact", "The zebra runner needs one retry after a long wait.").id
    rest = [mem.add("fact", f"A retry of job number {n} went fine").id for n in range(12)]
    with TextIndex(path, tmp_path / "fts.sqlite") as index:
        index.refresh()

        def found(query: str, common: int) -> list[tuple[str, float]]:
            return [(c[0], c[2]) for c in index.candidates(query, common=common)]

        assert found("retry", common=14)[0][0] == best
        assert found("retries", common=14) == found("retry", common=14)
        windowed = found("retry", common=5)
        assert {rid for rid, _ in windowed[:5]} == set(rest[-5:])
        assert [s for _, s in windowed[:5]] == sorted((s for _, s in windowed[:5]), reverse=True)
        assert sorted(rid for rid, _ in windowed) == sorted([best, zebra, *rest])
        mixed = found("zebra retry", common=5)
        assert mixed[0][0] == zebra
        assert {rid for rid, _ in mixed[1:6]} == set(rest[-5:])


def test_a_window_of_common_words_ranks_by_words_held_then_the_newer(tmp_path: Path) -> None:
    """Within a window of common words, a line holding more of the query's words comes
    first, and of lines holding as many, the newer (the plain scan's order, without
    BM25: its IDF would count every line holding the word, issue 20)."""
    path = tmp_path / "m.jsonl"
    mem = Memory.open(path)
    older = [mem.add("fact", f"Old job {n}.").id for n in range(3)]
    older += [mem.add("fact", f"Retry number {n} went fine.").id for n in range(3)]
    both = mem.add("fact", "Retry the deploy job after a timeout.").id
    job = mem.add("fact", "The nightly job ran long.").id
    retry = mem.add("fact", "Retry again.").id
    with TextIndex(path, tmp_path / "fts.sqlite") as index:
        index.refresh()  # each word held by 5 lines: common over 3
        found = [(c[0], c[2]) for c in index.candidates("retry job", common=3)]
    # The 3 latest lines holding either word, then the older ones.
    assert found == [(both, 2.0), (retry, 1.0), (job, 1.0), *((r, 1.0) for r in older[::-1])]


def test_one_common_word_gives_every_line_holding_it_the_newest_first(tmp_path: Path) -> None:
    """A query of one common word: each line holds it once, so the window's order is the
    newest line first; every line holding it comes, once, across pages (`batch`) and past
    lines without it."""
    path = tmp_path / "m.jsonl"
    mem = Memory.open(path)
    holding = []
    for n in range(9):
        holding.append(mem.add("fact", f"Retry number {n} went fine.").id)
        mem.add("fact", f"Unrelated line {n}.")
    with TextIndex(path, tmp_path / "fts.sqlite") as index:
        index.refresh()
        found = [(c[0], c[2]) for c in index.candidates("retries", batch=2, common=3)]
        windowed = [(c[0], c[2]) for c in index.candidates("retry zebra", batch=2, common=3)]
    assert found == [(rid, 1.0) for rid in reversed(holding)]
    assert windowed == found  # "zebra" held by no line: the same lines, the same order


def test_recall_of_a_common_word_reads_older_lines_past_stale_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The latest lines holding a common word are all forgotten: recall still finds the
    live older ones (the next, larger window), never fewer hits than live matches."""
    monkeypatch.setattr(textindex, "COMMON", 3)
    path, state = tmp_path / "m.jsonl", tmp_path / "state"
    mem = Memory.open(path)
    old = [mem.add("fact", f"retry the old job {n}").id for n in range(4)]
    for n in range(5):
        mem.forget(mem.add("fact", f"retry the new job {n}").id)
    assert set(_ids(path, "retry", state, limit=4)) == set(old)
    assert set(_ids(path, "retry", state, limit=10)) == set(old)
    assert set(_ids(path, "retry job zebra", state, limit=10)) == set(old)


def test_the_servers_recall_through_its_held_quick_part_answers_as_the_cache(
    tmp_path: Path,
) -> None:
    """The MCP server's recall (`recall_live`) checks its candidates against the quick
    part it holds, the lines appended since folded in: the same hits as a recall through
    this process's cache, after a forget, a supersession and appends; a damaged quick part
    is not trusted."""
    path, state = tmp_path / "m.jsonl", tmp_path / "state"
    ids = _fixture(path)
    mem = Memory(path)
    for n in range(40):
        mem.add("fact", f"Retry number {n} of the zebra job went fine.")
    store = ViewStore(StateDir(state), min_bytes=0)
    with located_index(path, store):
        pass  # the store and its quick part written
    queries = ["retries", "zebra mirror", "short answers", "bm25", "nothing here"]

    def both(view: LiveQuick) -> None:
        for q in queries:
            held = [(h.id, h.score) for h in recall_live(view, q, state_dir=state, limit=7)]
            cached = [(h.id, h.score) for h in recall(path, q, state_dir=state, limit=7)]
            assert held == cached, q

    view = LiveQuick(path, store)
    both(view)
    assert view.opened == 1  # answered from the quick part, not a fold
    mem.forget(ids["mirror"])
    mem.supersede(ids["limit"], "Retries need a limit of five.")
    mem.add("lesson", "A zebra retry added after the quick part was written.")
    both(view)
    assert view.opened == 1
    target = store.state.view_ranks(path)
    blob = bytearray(target.read_bytes())
    blob[-100] ^= 0xFF
    target.write_bytes(bytes(blob))
    both(LiveQuick(path, store))
    small = LiveQuick(path, ViewStore(StateDir(state)))  # under MIN_BYTES: the cache answers
    both(small)
    assert small.opened == 0


def test_an_index_merged_after_each_refresh_answers_the_same(tmp_path: Path) -> None:
    """A refresh that read `optimize_after` bytes merges the index into one segment (FTS5
    `optimize`): the rows and the candidates stay those of an index never merged."""
    path = tmp_path / "m.jsonl"
    _fixture(path)
    with (
        TextIndex(path, tmp_path / "merged.sqlite") as merged,
        TextIndex(path, tmp_path / "plain.sqlite") as plain,
    ):
        merged.optimize_after = 0
        plain.optimize_after = 1 << 40
        for n in range(3):
            Memory(path).add("fact", f"Retry {n} of the mirror.")
            assert merged.refresh() == plain.refresh() > 0
            assert merged.rows() == plain.rows()
            for query in ("retry", "mirror short", "bm25"):
                assert list(merged.candidates(query)) == list(plain.candidates(query))
        segments = "SELECT count(*) FROM docs_data"
        assert merged._db.execute(segments).fetchone() < plain._db.execute(segments).fetchone()
