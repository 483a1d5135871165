"""Fixtures for the escape regressions: the real hook, the real overlay engine, and
markers on the real disk that a command escaping the sandbox would create."""

from __future__ import annotations

from pathlib import Path

import pytest

from manager.session import paths
from tests.claude.conftest import Claude


@pytest.fixture
def claude(project: Path, tmp_path: Path) -> Claude:
    return Claude(project, tmp_path)


def upper(session: str = "sess-1") -> Path:
    """The session's upper directory: where every sandboxed write lands."""
    return Path(paths.session_root(session)) / "sandbox" / "upperdir"


def in_upper(path: Path, session: str = "sess-1") -> Path:
    return upper(session) / str(path).lstrip("/")


def file_tool_answer(claude: Claude, path: Path | str, tool: str = "Write") -> dict[str, object]:
    """The hook's answer to one of Claude's writing tools on ``path`` (the input shape each
    tool has: a notebook's path field, content, an edit's strings)."""
    field = "notebook_path" if tool == "NotebookEdit" else "file_path"
    answer = claude.hook("PreToolUse", {"tool_name": tool, "tool_use_id": "toolu_w",
                                        "tool_input": {field: str(path), "content": "x",
                                                       "old_string": "a", "new_string": "b"}})
    assert answer.returncode == 0, answer.stderr
    return answer.spec
