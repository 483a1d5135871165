"""Attack pass 21 (major: a setuid file committed without ``--allow-special``; content no
plan judged): an interrupted commit's resume copies whatever the upper entry of each
journaled step holds *when it resumes*, judged by nothing.

``commit/apply._resume`` finishes a journal before anything else, with ``_resume_check``
only: a step is "done" when the real path already matches the upper entry, else applied
when the real path did not change since the journal was written. What the upper entry is
by then is not asked: the plan's rules (``--allow-special`` for setuid, setgid, devices and
capabilities; the review record) were applied to the entry as it was when the interrupted
commit planned, and calls run between the two commits (the sandbox is the agent's again as
soon as the first commit died). Meanwhile ``workspace discard`` refuses ("an interrupted
commit is unfinished ... run `workspace commit` to finish it first"): the user cannot drop
the path, and the only way on applies it. ``commit OTHER`` resumes it too (the journal is
finished whatever paths are named).

Reproduction (overlay engine, every account): a call rewrites ``tool``; review; ``workspace
commit`` is interrupted before ``tool`` is copied (Ctrl-C on a slow commit, a crash, power
loss: here SIGKILL at that copy). A later call makes ``tool`` a setuid copy of ``sh``.
``workspace status`` marks it ``special: setuid (commit needs --allow-special)``; ``workspace
commit`` (without it) finishes the interrupted commit and the real ``tool`` is setuid.

Rule broken: commit refuses special files without ``--allow-special`` and applies only what
a plan judged. Rule that would close the class: the journal holds each step's upper entry as
planned (every attribute ``session/shown.entry`` records); a resume applies a step only
while its upper entry is still that, else leaves it pending for a fresh plan (and discard may
then drop it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.engines import accounts
from tests.security.two_sessions import ID_SETUPS
from tests.security.two_sessions import account_for

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

# `workspace commit`, killed as it starts copying the upper entry named ``tool``: the
# journal is written, nothing of this step done.
KILLED_AT_TOOL = """
import os, signal
from manager.commit import steps
real = steps._copy_entry
def copy(up_fd, up_name, *rest):
    if up_name == "tool":
        os.kill(os.getpid(), signal.SIGKILL)
    return real(up_fd, up_name, *rest)
steps._copy_entry = copy
from manager.main import main
raise SystemExit(main(["commit"]))
"""


@pytest.mark.parametrize("ids", ID_SETUPS)
def test_a_resumed_commit_does_not_apply_a_setuid_file_made_after_the_interruption(
        ids: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    try:
        tool = account.project / "tool"
        tool.write_text("#!/bin/sh\necho real\n")
        tool.chmod(0o755)
        account.chown(tool)
        ran = account.ws("run", "--", "sh", "-c",
                         "echo 'echo v2' >> tool && echo a > a.txt", env=env, timeout=120)
        assert ran.returncode == 0, ran
        account.ws("diff", env=env, check=True)
        killed = account.run([account.python, "-c", KILLED_AT_TOOL], env=env, timeout=120)
        assert killed.returncode in (-9, 137), killed
        journals = list(account.state.glob("workspace/sessions/*/commit-journal.json"))
        assert journals, "the commit died before its journal"
        assert not stat.S_IMODE(tool.stat().st_mode) & stat.S_ISUID
        # The agent's next call, after the interruption.
        ran = account.ws("run", "--", "sh", "-c", "cp /bin/sh tool && chmod 4755 tool",
                         env=env, timeout=120)
        assert ran.returncode == 0, ran
        status = account.ws("status", env=env, check=True).stdout
        assert "setuid" in status, status   # review says: commit needs --allow-special
        discard = account.ws("discard", "--yes", "tool", env=env)
        done = account.ws("commit", env=env, timeout=120)
        mode = os.lstat(tool).st_mode
        assert not mode & stat.S_ISUID, (
            f"the real tool is now mode {stat.S_IMODE(mode):o} (setuid, {tool.stat().st_size} "
            f"bytes: the sandbox's copy of sh), committed without --allow-special though "
            f"status said so ({status.strip()!r}); discard said: "
            f"{discard.stdout}{discard.stderr}; commit said: {done.stdout}{done.stderr}")
    finally:
        accounts.clean(account)
