"""The agent's loop in the real client: its own Write/Edit tools between sandboxed Bash calls.

Each call sees the latest state: a file the Write tool makes in the project runs in the next
Bash call, runs again changed after an Edit, and after a Bash change the agent's `git status`
and `git diff` show it (issue 14, docs/fidelity.md). Outside the project the writing tools
are refused (issue 20: what they write there runs later on the host): the agent writes
such files with a Bash command, in the sandbox.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

from .claude import ClaudeEnv
from .fake_api import Bash
from .fake_api import Tool
from .test_plugin import run


def test_write_run_edit_run_then_git_sees_the_change(claude_env: ClaudeEnv, project_dir: Path) -> None:
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
    subprocess.run([*git, "init", "-q"], cwd=project_dir, check=True)
    (project_dir / "tracked.txt").write_text("committed\n")
    subprocess.run([*git, "add", "tracked.txt"], cwd=project_dir, check=True)
    subprocess.run([*git, "commit", "-qm", "c"], cwd=project_dir, check=True)
    in_tmp = Path(f"/tmp/ws-e2e-{uuid.uuid4().hex}.py")
    in_project = project_dir / "tool.py"
    both = f"python3 {in_tmp} && python3 tool.py"
    steps = [Tool("Write", {"file_path": str(in_tmp), "content": "print('tmp v1')\n"}),
             Bash(f"echo \"print('tmp v1')\" > {in_tmp}"),
             Tool("Write", {"file_path": str(in_project), "content": "print('project v1')\n"}),
             Bash(both),
             Tool("Edit", {"file_path": str(in_project), "old_string": "v1", "new_string": "v2"}),
             Bash(both),
             Bash("echo changed >> tracked.txt"),
             Bash("git status --short"),
             Bash("git diff"),
             "done"]
    try:
        result = run(claude_env, project_dir, steps)
    finally:
        in_tmp.unlink(missing_ok=True)
    out = result.tool_results()
    assert out[0].is_error and "outside the project" in out[0].content, result.describe()
    assert not any(r.is_error for r in out[1:]), result.describe()
    assert not in_tmp.exists()                                           # held in the sandbox
    assert out[3].content == "tmp v1\nproject v1", result.describe()
    assert out[5].content == "tmp v1\nproject v2", result.describe()
    assert out[7].content.splitlines() == [" M tracked.txt", "?? tool.py"], result.describe()
    assert "+changed" in out[8].content.splitlines(), result.describe()
    assert (project_dir / "tracked.txt").read_text() == "committed\n"   # held in the sandbox
