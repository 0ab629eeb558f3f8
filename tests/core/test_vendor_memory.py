"""Reading other agents' Markdown memories (issue 22, item 7): what becomes an entry.

The files are in tests/helpers/vendor_files.py, each built from the tool's documentation
or source (named there)."""

from __future__ import annotations

import pytest

from memsync.core.vendor_memory import (
    agents_md,
    claude_index,
    claude_memory,
    entry_id,
    gemini_md,
)
from memsync.errors import MemsyncError
from tests.helpers.vendor_files import (
    AGENTS_MD,
    CLAUDE_DEBUGGING,
    CLAUDE_FEEDBACK,
    CLAUDE_INDEX,
    CLAUDE_NO_FRONTMATTER,
    CLAUDE_USER_ROLE,
    GEMINI_MD,
)


def test_a_claude_memory_is_its_body_and_its_type_is_a_kind() -> None:
    (found,) = claude_memory("debugging.md", CLAUDE_DEBUGGING)
    assert found.kind == "source"  # type: reference
    assert found.tags == ("claude-auto-memory", "reference")
    assert found.text == (
        "Auth tokens rotate every 24 h: a 401 after midnight UTC means a stale token, not a bug.\n"
        "See the runbook at docs/runbooks/auth.md."
    )
    assert found.where == "debugging.md:7"
    assert claude_memory("u.md", CLAUDE_USER_ROLE)[0].kind == "preference"
    (feedback,) = claude_memory("f.md", CLAUDE_FEEDBACK)
    assert feedback.kind == "lesson"
    assert feedback.text.count("\n\n") == 2  # Why / How to apply kept as paragraphs


def test_a_claude_memory_without_frontmatter_or_body() -> None:
    (plain,) = claude_memory("b.md", CLAUDE_NO_FRONTMATTER)
    assert (plain.kind, plain.tags) == ("fact", ("claude-auto-memory",))
    (described,) = claude_memory("d.md", "---\nname: x\ndescription: Only a hook\n---\n\n")
    assert described.text == "Only a hook"
    assert claude_memory("e.md", "---\nname: x\n---\n") == []


def test_the_same_claude_memory_saved_by_another_editor_is_the_same_text() -> None:
    crlf = CLAUDE_DEBUGGING.replace("\n", "\r\n").replace("bug.", "bug.   ") + "\n\n"
    assert claude_memory("a.md", crlf)[0].text == claude_memory("b.md", CLAUDE_DEBUGGING)[0].text


def test_an_unclosed_frontmatter_is_one_line_naming_the_file() -> None:
    with pytest.raises(MemsyncError, match=r"^x\.md:1: the frontmatter .* never closed$"):
        claude_memory("x.md", "---\nname: x\ntype: user\nThe body.\n")


def test_the_index_gives_only_hand_written_bullets() -> None:
    found = claude_index("MEMORY.md", CLAUDE_INDEX)
    assert [(f.where, f.text) for f in found] == [("MEMORY.md:7", "Staging deploys need the VPN.")]


def test_gemini_sections_give_their_bullets_only() -> None:
    found = gemini_md("GEMINI.md", GEMINI_MD)
    assert [f.text for f in found] == [
        "My preferred programming language is Python.",
        "The staging server IP is 10.0.0.5.",
        "The staging server IP is 10.0.0.5.",  # one memory twice: one entry (one id)
        "Release notes go in CHANGELOG.md.",
    ]
    assert found[0].where == "GEMINI.md:8"
    assert {f.kind for f in found} == {"fact"}


def test_a_gemini_file_without_the_section_is_one_line() -> None:
    with pytest.raises(MemsyncError, match=r"^G\.md: no '## Gemini Added Memories' section"):
        gemini_md("G.md", "# Project\n- a rule, not a saved memory\n")


def test_agents_md_items_and_paragraphs_tagged_with_their_heading() -> None:
    found = agents_md("AGENTS.md", AGENTS_MD)
    assert [(f.text, f.tags[-1]) for f in found] == [
        (
            (
                "Use `pnpm dlx turbo run where <project_name>` to jump to a package instead of "
                "scanning with `ls`."
            ),
            "Dev environment tips",
        ),
        (
            (
                "Run `pnpm install --filter <project_name>` to add the package to your workspace "
                "so Vite, ESLint, and TypeScript can see it."
            ),
            "Dev environment tips",
        ),
        ("Find the CI plan in the .github/workflows folder.", "Testing instructions"),
        ("Fix any test or type errors until the whole suite is green.", "Testing instructions"),
        (
            (
                "Title format: [<project_name>] <Title>. Always run `pnpm lint` and `pnpm test` "
                "before committing."
            ),
            "PR instructions",
        ),
    ]
    assert found[0].where == "AGENTS.md:4"
    assert {f.kind for f in found} == {"preference"}


def test_agents_md_setext_headings_and_rules() -> None:
    text = "Build\n=====\nRun make.\n\n---\n\nNo heading change here.\n"
    assert [(f.text, f.tags) for f in agents_md("A.md", text)] == [
        ("Run make.", ("agents-md", "Build")),
        ("No heading change here.", ("agents-md", "Build")),
    ]


def test_ids_depend_on_what_the_entry_says_only() -> None:
    assert entry_id("gemini-md", "fact", "global", "x") == entry_id(
        "gemini-md", "fact", "global", "x"
    )
    assert entry_id("gemini-md", "fact", "global", "x") != entry_id(
        "agents-md", "fact", "global", "x"
    )


def test_agents_md_frontmatter_is_no_memory() -> None:
    """The draft AGENTS.md v1.1 frontmatter (`description`, `tags`) is skipped."""
    text = "---\ndescription: Web app\ntags: [web]\n---\n## Build\n- Run make.\n"
    assert [(f.where, f.text, f.tags) for f in agents_md("A.md", text)] == [
        ("A.md:6", "Run make.", ("agents-md", "Build"))
    ]
