"""Attack pass 10 (lesser): a hidden path whose name holds a line break is not hidden.

``manager.hide.write_list`` drops every path holding ``\\n`` from ``hide.list`` without a
word, and the overlay holder reads the list with ``str.splitlines()``, which also breaks at
``\\r``, ``\\x0b``, ``\\x0c``, ``\\x1c``-``\\x1e``, ``\\x85``, ``\\u2028`` and ``\\u2029``: the
path is cut in two, neither half is the secret, and it is shown whole inside. The rule is
"nothing runs with less hidden than asked" (a path that cannot be hidden stops the holder).
"""

from __future__ import annotations

import json
import os
import shlex
import time
from pathlib import Path

import pytest

from tests.claude.conftest import Claude

# Claude is made here, not by its fixture: run as the ordinary user too.
pytestmark = pytest.mark.as_user


@pytest.mark.parametrize("odd", ["\n", "\r", "\x85", "\u2028"], ids=["lf", "cr", "nel", "ls"])
def test_a_hidden_directory_with_a_line_break_in_its_name_is_hidden(
        odd: str, project: Path, tmp_path: Path) -> None:
    secret_dir = tmp_path / f"keys{odd}old"
    secret_dir.mkdir()
    canary = f"SECRET-CANARY-{os.getpid()}-{time.time_ns()}"
    (secret_dir / "key").write_text(canary + "\n")
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace" / "config.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"hide: [{json.dumps(str(secret_dir))}]\n")
    claude = Claude(project, tmp_path)
    claude.start()
    answer = claude.pre_bash(f"cat {shlex.quote(str(secret_dir / 'key'))}; true")
    if answer.decision == "deny" or "updatedInput" not in answer.spec:
        return   # refused: nothing ran with less hidden than asked
    run = claude.shell(answer.command)
    assert canary not in run.stdout, f"the hidden {secret_dir!r} is read inside the sandbox"
