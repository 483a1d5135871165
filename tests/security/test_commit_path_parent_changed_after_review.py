"""Attack pass 22 (critical: an unreviewed commit of a directory's mode): ``workspace commit
PATH`` applies the new parent directory PATH needs (``plan.with_parents``) as the upper holds
it at commit, but both its checks against review look only at PATH.

``commands/commit.py`` ``_refuse_unreviewed`` drops every late path not within the named
paths, and ``shown.late(seen, found, paths)`` compares only recorded entries within them.
The plan adds the parent ``fresh`` as a ``dir`` step, which applies its mode, owner and
xattrs.

The attack (the container engines keep a call's background processes): a call makes
``fresh/a.txt`` (``fresh`` 0755) and leaves a process running; the user reviews (``fresh/``
0755 and ``a.txt``); the process runs ``chmod 2777 fresh``; ``workspace commit fresh/a.txt``
commits, and the real ``fresh`` is 2777 (world-writable, setgid), never shown. (A plain
``workspace commit`` refuses: "changed after the last call ended and after your last
review".)

Promise broken: what commit applies is exactly what review showed.

Rule that would close the class: the checks against review cover every entry the plan
applies, not the paths named (the parents ``with_parents`` brings in included).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tests.engines.conftest import engine_cli
from tests.security.after_review import container_engine  # noqa: F401 - the fixture
from tests.security.after_review import release

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

LATER = ("sh -c 't=0; while [ ! -e /dev/shm/go ] && [ $t -lt 300 ]; do sleep 0.1; t=$((t+1)); done; "
         "chmod 2777 fresh; : > /dev/shm/done; sleep 60' >/dev/null 2>&1 </dev/null &")


def test_commit_path_applies_no_parent_changed_after_review(
        ws, project: Path, container_engine: str) -> None:  # noqa: F811
    cli = engine_cli(container_engine)
    ws("run", "--", "sh", "-c", "mkdir fresh && chmod 0755 fresh && echo ok > fresh/a.txt; "
       + LATER, check=True)
    shown = ws("diff", "--no-pager", check=True).stdout + \
        ws("status", "--no-pager", check=True).stdout
    assert "fresh" in shown, shown
    release(cli, "/dev/shm/done", what="the background process never ran")
    proc = ws("commit", str(project / "fresh/a.txt"))
    fresh = project / "fresh"
    mode = stat.S_IMODE(os.lstat(fresh).st_mode) if fresh.exists() else None
    assert mode in (None, 0o755), (
        f"commit fresh/a.txt made the real fresh/ mode {mode:o}, changed after the review "
        f"(which showed 755): commit said {proc.stdout!r} {proc.stderr!r} "
        f"(exit {proc.returncode})")
