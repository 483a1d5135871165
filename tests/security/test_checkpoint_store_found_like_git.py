"""Attack pass 11: the checkpoint store is hidden where ``manager.hide.checkpoint_store`` looks
for it, which is not always where the guard rails make it.

``hide.checkpoint_store`` walks up from the project and takes the first ``.git`` directory it
meets as the repository. git (``guardrails.shadow.open_shadow`` -> ``git rev-parse``) takes a
``.git`` directory only when it is a repository (``HEAD``, ``objects``, ``refs``), and walks on
up otherwise. A project that is a subdirectory of a repository and holds a ``.git`` directory
that is not one (empty: a half-removed clone, an uninitialised nested checkout, a tool's
leftover) gets its snapshots in the parent's ``.git/workspace-checkpoints.git``, while the
sandbox hides ``<project>/.git/workspace-checkpoints.git`` (which does not exist: nothing is
hidden). The store holds the real work tree's hidden files (an untracked ``.env``), and a
sandboxed command decompresses them from the parent's store. Rule broken: hidden paths'
content is never readable inside (promise 3; security.md "the checkpoint store is always
hidden from the sandbox").
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.engines.conftest import engine_cli
from tests.engines.conftest import engine_name  # noqa: F401 - the fixture

pytestmark = pytest.mark.as_user

READ_OBJECTS = (
    "python3 -c 'import os,zlib,sys\n"
    "for d,_,fs in os.walk(\"../.git/workspace-checkpoints.git/objects\"):\n"
    "  for f in fs:\n"
    "    try: sys.stdout.write(zlib.decompress(open(os.path.join(d,f),\"rb\").read())"
    ".decode(errors=\"replace\")+\"\\n\")\n"
    "    except Exception: pass'")


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo,
                   check=True, capture_output=True)


@pytest.mark.parametrize("engine_name", ["overlay", "podman", "docker"], indirect=True)
def test_the_store_git_finds_above_a_stray_dot_git_is_hidden(
        engine_name: str, tmp_path: Path) -> None:  # noqa: F811
    repo = tmp_path / "repo"
    project = repo / "sub"
    project.mkdir(parents=True)
    (project / "README.txt").write_text("hello\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "base")
    (project / ".git").mkdir()   # not a repository: git walks on up to repo/.git
    canary = f"SECRET-CANARY-{os.getpid()}-{time.time_ns()}"
    (project / ".env").write_text(f"API_KEY={canary}\n")     # untracked, not ignored
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"hide: [{project / '.env'}]\n")
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    claude.start()
    claude.hook("UserPromptSubmit", {"prompt": "go on"})
    assert (repo / ".git" / "workspace-checkpoints.git").is_dir(), \
        "the guard rails made no store above: the attack proves nothing"
    direct = claude.bash("cat .env; true")
    assert canary not in direct.stdout, "hide does not hold at all"
    through_store = claude.bash(READ_OBJECTS)
    assert canary not in through_store.stdout, (
        "the hidden .env is readable inside the sandbox from the checkpoint store git chose "
        "(above a .git directory that is not a repository): " + through_store.stdout[-300:])
