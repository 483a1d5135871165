"""Attack pass 10: a hidden file inside the project is readable inside the sandbox through the
checkpoint store.

`hide` (or a `Read(...)` deny rule) masks ``<project>/.env`` in the sandbox. The guard rails'
snapshot (SessionStart's budget baseline, UserPromptSubmit, Stop; on by default in a git
project) runs ``git add -A`` of the real work tree into ``.git/workspace-checkpoints.git``,
which nothing hides: the untracked ``.env`` becomes a loose object there, and a sandboxed
command decompresses it. No race, no root.
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

# Claude is made here, not by its fixture: run as the ordinary user too.
pytestmark = pytest.mark.as_user

READ_OBJECTS = (
    "python3 -c 'import os,zlib,sys\n"
    "for d,_,fs in os.walk(\".git/workspace-checkpoints.git/objects\"):\n"
    "  for f in fs:\n"
    "    try: sys.stdout.write(zlib.decompress(open(os.path.join(d,f),\"rb\").read())"
    ".decode(errors=\"replace\")+\"\\n\")\n"
    "    except Exception: pass'")


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=project,
                   check=True, capture_output=True)


@pytest.mark.parametrize("engine_name", ["overlay", "podman", "docker"], indirect=True)
def test_a_hidden_file_in_the_project_is_not_readable_through_the_checkpoint_store(
        engine_name: str, project: Path, tmp_path: Path) -> None:  # noqa: F811
    claude = Claude(project, tmp_path, engine=engine_cli(engine_name))
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "base")
    canary = f"SECRET-CANARY-{os.getpid()}-{time.time_ns()}"
    (project / ".env").write_text(f"API_KEY={canary}\n")     # untracked, not ignored
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"hide: [{project / '.env'}]\n")
    claude.start()
    claude.hook("UserPromptSubmit", {"prompt": "go on"})
    direct = claude.bash("cat .env; true")
    assert canary not in direct.stdout, "hide does not hold at all"
    through_store = claude.bash(READ_OBJECTS)
    assert canary not in through_store.stdout, (
        "the hidden .env is readable inside the sandbox from the checkpoint store: "
        + through_store.stdout[-300:])
