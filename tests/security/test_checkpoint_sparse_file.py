"""Attack pass 10 (lesser): a sparse file in the sandbox makes the guard rails' snapshot read
its whole length on the host.

``truncate -s 1T big.bin`` costs the sandbox no block. The UserPromptSubmit and Stop hooks'
snapshot hashes every changed file into the checkpoint store (``git hash-object -w``), which
reads and deflates every zero: 4 GiB took over two minutes of a core here, the hook ran past
every timeout (the client's, this test's) and its git went on, orphaned, writing about a
thousandth of the length into ``.git`` on the host at each prompt and each stop. Pass 9's rule
for Read's copy (a sparse file costs the host no more than it costs the sandbox) does not hold
on this route.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

from tests.claude.conftest import Claude

SIZE = "64G"
WITHIN_S = 30


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=project,
                   check=True, capture_output=True)


def test_a_sparse_file_does_not_stall_the_prompt_hook(claude: Claude, project: Path) -> None:
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "base")
    claude.start()
    assert claude.bash(f"truncate -s {SIZE} big.bin").returncode == 0
    took = prompt_hook_seconds(claude, project, WITHIN_S)
    assert took is not None, (f"UserPromptSubmit still ran after {WITHIN_S} s: the snapshot reads "
                              f"a {SIZE} sparse file the sandbox made (it costs the sandbox no block)")


def prompt_hook_seconds(claude: Claude, project: Path, within: float) -> float | None:
    """Run the real UserPromptSubmit hook; the seconds it took, or None when it still ran
    after ``within`` (then it and what it started are killed)."""
    payload = json.dumps({"session_id": claude.session_id, "cwd": str(project),
                          "hook_event_name": "UserPromptSubmit", "prompt": "go on"}).encode()
    hook = subprocess.Popen([str(claude.launcher), "UserPromptSubmit"], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=project,
                            env=claude.env, start_new_session=True)
    started = time.monotonic()
    assert hook.stdin is not None
    hook.stdin.write(payload)
    hook.stdin.close()
    with contextlib.suppress(subprocess.TimeoutExpired):
        hook.wait(timeout=within)
    if hook.poll() is not None:
        return time.monotonic() - started
    os.killpg(hook.pid, signal.SIGKILL)   # the hook and the git it started
    hook.wait()
    return None
