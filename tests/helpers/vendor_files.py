"""Files shaped like the ones other agents keep their memory in (issue 22, item 7), built
from each tool's documentation and source, and the shapes they take after an agent or a
person edited them. Each constant names its source."""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "AGENTS_MD",
    "CLAUDE_DEBUGGING",
    "CLAUDE_FEEDBACK",
    "CLAUDE_INDEX",
    "CLAUDE_NO_FRONTMATTER",
    "CLAUDE_USER_ROLE",
    "GEMINI_MD",
    "claude_memory_folder",
]

# Claude Code, auto memory: code.claude.com/docs/en/memory ("a MEMORY.md index and one
# topic file per memory": MEMORY.md, user_role.md, feedback_testing.md), the
# claude-directory page's index example (`# Memory Index`, `## Project`, a pointer line),
# and the frontmatter example (`name`, `description`, `type`, `modified`). The pointer with
# an em dash is the model's own instruction (`- [Title](file.md) — one-line hook`); the
# hand-written bullet and the file without frontmatter are what people add ("Real files
# also hold hand-written bullets"; "Claude Code never adds frontmatter to a file that has
# none").
CLAUDE_INDEX = """\
# Memory Index

## Project
- [build-and-test.md](build-and-test.md): npm run build (~45s), Vitest, dev server on 3001
- [Debugging patterns](debugging.md) — auth token rotation, DB connection troubleshooting
- [User role](user_role.md) — senior backend engineer, prefers terse answers
- Staging deploys need the VPN.
"""

CLAUDE_DEBUGGING = """\
---
name: Debugging patterns
description: Auth token rotation and database connection troubleshooting for this project
type: reference
modified: 2026-11-02T14:03:11Z
---

Auth tokens rotate every 24 h: a 401 after midnight UTC means a stale token, not a bug.
See the runbook at docs/runbooks/auth.md.
"""

CLAUDE_USER_ROLE = """\
---
name: User role
description: "Senior backend engineer; prefers terse answers"
type: user
---
The user is a senior backend engineer who prefers terse answers without preamble.
"""

CLAUDE_FEEDBACK = """\
---
name: Testing feedback
description: Integration tests must hit a real database
type: feedback
---
Integration tests must use a real database, never mocks.

**Why:** a mocked migration passed last quarter and broke production.

**How to apply:** start the compose stack before running `pytest -m integration`.
"""

CLAUDE_NO_FRONTMATTER = "The build-and-test command is `npm run build && npm test`.\n"


def claude_memory_folder(root: Path) -> Path:
    """A `~/.claude/projects/<project>/memory/` folder holding the files above."""
    folder = root / "-home-u-my-app-v2" / "memory"
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").write_text(CLAUDE_INDEX)
    (folder / "debugging.md").write_text(CLAUDE_DEBUGGING)
    (folder / "user_role.md").write_text(CLAUDE_USER_ROLE)
    (folder / "feedback_testing.md").write_text(CLAUDE_FEEDBACK)
    (folder / "build-and-test.md").write_text(CLAUDE_NO_FRONTMATTER)
    (folder / "team").mkdir()  # server-synced team memory: not this tool's to read
    (folder / "team" / "shared.md").write_text("---\nname: t\ntype: project\n---\nTeam note.\n")
    return folder


# Gemini CLI, legacy `save_memory` (<= v0.43): google-gemini/gemini-cli
# packages/core/src/tools/memoryTool.ts @46d6b119b6 writes `- <fact>` under
# `## Gemini Added Memories` (appended with a blank line after the file's own text; the
# section runs to the next "\n## "); docs/cli/gemini-md.md shows the file's other content.
# The second section is what `cat`-ing two GEMINI.md files, or a person moving one, leaves.
GEMINI_MD = """\
# Project: My TypeScript Library

## General Instructions
- When you generate new TypeScript code, follow the existing coding style.
- Ensure all new functions and classes have JSDoc comments.

## Gemini Added Memories
- My preferred programming language is Python.
- The staging server IP is 10.0.0.5.

## Coding Style
- Use 2 spaces for indentation.

## Gemini Added Memories
- The staging server IP is 10.0.0.5.
- Release notes go in CHANGELOG.md.
"""

# AGENTS.md: the sample of agents.md (github.com/agentsmd/agents.md, README), cut down, with
# a fenced block and an HTML comment as people write them, and a block between memsync's
# own markers (never ingested).
AGENTS_MD = """\
# Sample AGENTS.md file

## Dev environment tips
- Use `pnpm dlx turbo run where <project_name>` to jump to a package instead of scanning with `ls`.
- Run `pnpm install --filter <project_name>` to add the package to your workspace so Vite,
  ESLint, and TypeScript can see it.

## Testing instructions
- Find the CI plan in the .github/workflows folder.
- Fix any test or type errors until the whole suite is green.

```sh
pnpm turbo run test --filter <project_name>
```

<!-- maintainers: keep this file short -->

## PR instructions
Title format: [<project_name>] <Title>.
Always run `pnpm lint` and `pnpm test` before committing.

<!-- memsync: begin (generated; edit lines to change memories) -->
- A rendered memory, not to be read back.
<!-- memsync: end -->
"""
