"""Claude Code updates the plugin between two Bash calls of a running session.

The old release's hooks (SessionStart, PreToolUse, Stop) set the session up,
sandbox a call that leaves the shell in a directory only the sandbox has, and
take a checkpoint; then the plugin directory is replaced by this release (the
old one deleted, as Claude Code does) and the next calls go through the new
hooks: same session, same pending changes, same cwd, still sandboxed; the
guard rails go on from the old baseline and checkpoints, and `rewind` works.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from tests.claude.conftest import Claude
from tests.upgrade.old_release import REPO
from tests.upgrade.old_release import changes
from tests.upgrade.old_release import cli
from tests.upgrade.old_release import env_for


class Client(Claude):
    """A client whose plugin root (and the code its launcher runs) can change."""

    def use(self, root: Path) -> None:
        self.launcher = root / "bin" / "workspace-hook"
        # The plugin's own interpreter keeps running the plugin's code: PYTHONPATH follows it.
        self.env.update(CLAUDE_PLUGIN_ROOT=str(root), PYTHONPATH=str(root),
                        WORKSPACE_PYTHON=sys.executable)

    def stop(self) -> None:
        answer = self.hook("Stop", {"stop_hook_active": False})
        assert (answer.returncode, answer.stdout) == (0, ""), answer


def checkpoints(project: Path) -> list[dict]:
    out = cli(REPO, "checkpoints", "--session", "sess-1", "--json", cwd=project).stdout
    return json.loads(out)["checkpoints"]


def test_a_plugin_updated_mid_session_keeps_sandboxing_into_the_same_session(
        old_code: Path, git_project: Path, tmp_path: Path) -> None:
    plugin = tmp_path / "plugin-0.1.0"
    shutil.copytree(old_code, plugin)
    client = Client(git_project, tmp_path)
    client.use(plugin)
    assert client.start().returncode == 0
    first = client.bash("mkdir -p sub/deep && cd sub/deep && echo one > one.txt && pwd")
    assert first.returncode == 0 and first.stdout.strip() == f"{git_project}/sub/deep"
    (git_project / "mod.txt").write_text("edited by a file tool\n")   # a real edit: budget
    client.stop()
    made_by_old = checkpoints(git_project)
    assert len(made_by_old) == 1

    shutil.rmtree(plugin)          # the update: the old version's directory is gone
    client.use(REPO)
    answer = client.pre_bash("pwd; cat one.txt; echo two > two.txt")
    assert answer.decision != "deny", answer.json
    assert str(REPO) in answer.command and str(plugin) not in answer.command
    second = client.shell(answer.command)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split("\n")[:2] == [f"{git_project}/sub/deep", "one"]
    assert not (git_project / "sub").exists()          # nothing ran outside the sandbox
    pending = {str(Path(c["path"]).relative_to(git_project)): c["kind"]
               for c in changes(REPO, git_project, "--session", "sess-1")}
    assert pending == {"sub": "added", "sub/deep": "added", "sub/deep/one.txt": "added",
                       "sub/deep/two.txt": "added"}

    budget = json.loads(cli(REPO, "budget", "--session", "sess-1", "--json",
                            cwd=git_project).stdout)
    assert "mod.txt" in json.dumps(budget)        # counted from the old release's baseline
    client.stop()
    items = checkpoints(git_project)
    assert [i["commit"] for i in items[:1]] == [made_by_old[0]["commit"]] and len(items) == 2
    cli(REPO, "rewind", "--session", "sess-1", str(made_by_old[0]["id"]), cwd=git_project)
    pending = {str(Path(c["path"]).relative_to(git_project))
               for c in changes(REPO, git_project, "--session", "sess-1")}
    assert "sub/deep/one.txt" in pending and "sub/deep/two.txt" not in pending
    assert (git_project / "mod.txt").read_text() == "edited by a file tool\n"
    assert cli(REPO, "status", cwd=git_project, env=env_for(REPO)).returncode == 0
