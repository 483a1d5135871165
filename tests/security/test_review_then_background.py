"""Attack pass 3: a background call (run_in_background) changes the sandbox after review.

Review now says so: status (its notes, and ``running`` in --json) and diff name the calls
still running, whose next writes a review made now cannot show (engines' ``running``).

The overlay engine ends every orphan of a finished call, but a call the client runs in
the background is not finished: it sleeps past the user's `workspace status` and
`workspace diff` (which say nothing of a call still running), then rewrites the file,
and exits before `workspace commit`, which applies what nobody reviewed.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from tests.claude.conftest import Claude


def test_commit_applies_only_what_review_showed(claude: Claude, project: Path, ws):
    claude.start()
    assert claude.bash("echo good > README.txt").returncode == 0
    answer = claude.pre_bash("sleep 4; echo EVIL > README.txt", run_in_background=True)
    line = answer.command
    background = subprocess.Popen(["/bin/bash", "-c", line], cwd=project, env=claude.env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1)
    status = ws("status").stdout
    import json

    assert json.loads(ws("status", "--json").stdout)["running"], "status --json names no call"
    shown = ws("diff", "--no-pager").stdout
    assert "+good" in shown
    background.wait(timeout=30)
    ws("commit")
    committed = (project / "README.txt").read_text()
    said_running = "running" in status.lower()
    assert committed == "good\n" or said_running, (
        f"review showed 'good' and no running call; commit applied {committed!r}")
