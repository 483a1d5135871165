"""Attack pass 6: after the review, a process a call left running (the container engines
keep them) retargets a symlink and changes a file's mode; commit applies both unseen.

Commit compares the content of each regular file with what the review read (session/
shown.py) and, in volume mode, the upper entries' names; a symlink has no digest and keeps
its name when retargeted (``ln -sfn``), and a mode is no content. In volume mode the times
say nothing (the export rewrites the host's upper), so nothing else refuses them: the review
showed ``link -> ok.txt`` and a 0644 ``run.sh``, commit wrote ``link -> /etc/hostname`` and a
0755 ``run.sh``. (Host mode's ctime check is there too: it must refuse as well.)
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.conftest import engine_cli
from tests.engines.conftest import using_engine
from tests.security.after_review import container_engine  # noqa: F401 - the fixture
from tests.security.after_review import release

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

LATER = ("sh -c 't=0; while [ ! -e /dev/shm/go ] && [ $t -lt 300 ]; do sleep 0.1; t=$((t+1)); done; "
         "ln -sfn /etc/hostname out/link; chmod 0755 out/run.sh; : > /dev/shm/done; sleep 60' "
         ">/dev/null 2>&1 </dev/null &")



def test_a_symlink_or_mode_changed_after_review_is_not_committed_unseen(
        ws, project: Path, container_engine: str):  # noqa: F811
    cli = engine_cli(container_engine)
    (project / "out").mkdir()
    ws("run", "--", "sh", "-c", "echo ok > out/ok.txt; ln -s ok.txt out/link; "
                                "echo 'echo hi' > out/run.sh; chmod 0644 out/run.sh; " + LATER,
       check=True)
    shown = ws("diff", "--no-pager", check=True).stdout + ws("status", "--no-pager", check=True).stdout
    assert "/etc/hostname" not in shown, shown
    release(cli, "/dev/shm/done", what="the background process never ran")
    proc = ws("commit")
    link = project / "out" / "link"
    target = os.readlink(link) if os.path.islink(link) else None
    run = project / "out" / "run.sh"
    mode = stat.S_IMODE(os.stat(run).st_mode) if run.exists() else None
    assert target != "/etc/hostname" and mode != 0o755, (
        f"commit applied a change made after the review, unseen: link -> {target}, run.sh "
        f"{mode and oct(mode)} (commit exit {proc.returncode}: {proc.stderr})")


# The class: each attribute commit applies, changed after the review by a process the call
# left running, one path each (a commit of that path alone names it and applies nothing).
BEFORE = ("mkdir -p out/d2f out/dir; echo ok > out/ok.txt; ln -s ok.txt out/link; "
          "echo hi > out/run.sh; chmod 0644 out/run.sh; echo hi > out/suid; chmod 0755 out/suid; "
          "echo f > out/f2s; ln -s ok.txt out/s2f; chmod 0755 out/dir; echo x > out/x.txt; ")
AFTER = {   # path -> what the process does to it after the review
    "link": "ln -sfn /etc/hostname out/link",                        # symlink retargeted
    "run.sh": "chmod 0755 out/run.sh",                               # mode
    "suid": "chmod 4755 out/suid",                                   # setuid (--allow-special)
    "f2s": "rm out/f2s && ln -s /etc/hostname out/f2s",              # file -> symlink
    "s2f": "rm out/s2f && echo evil > out/s2f",                      # symlink -> file
    "d2f": "rmdir out/d2f && echo evil > out/d2f",                   # directory -> file
    "dir": "chmod 1777 out/dir",                                     # a directory's mode, sticky
    "x.txt": "python3 -c 'import os; os.setxattr(\"out/x.txt\", \"user.k\", b\"v\")'",  # xattr
}


def _later(steps: str) -> str:
    """Leave a process running that makes ``steps`` at the test's signal (a script in the
    container's /dev/shm: the steps hold quotes of their own)."""
    return (f"cat > /dev/shm/later.sh <<'EOF'\n"
            "t=0; while [ ! -e /dev/shm/go ] && [ $t -lt 300 ]; do sleep 0.1; t=$((t+1)); done\n"
            f"{steps}\n: > /dev/shm/done; sleep 60\nEOF\n"
            "sh /dev/shm/later.sh >/dev/null 2>&1 </dev/null &")


def _entry(path: Path) -> tuple[int, str | None] | None:
    if not os.path.lexists(path):
        return None
    st = os.lstat(path)
    return st.st_mode, os.readlink(path) if stat.S_ISLNK(st.st_mode) else None


def _old_record(ws, project: Path) -> None:
    """Rewrite the current record as the format before attributes did (content digests
    and names only): commit must ask for a new review, never accept what it lacks."""
    from manager.session import store

    sandbox = store.list_sessions()[0][0].sandbox
    calls = os.stat(sandbox / "running").st_mtime_ns
    (sandbox / "shown").write_bytes(b"%d 0 -1\n" % calls)


@pytest.fixture(params=["docker", "podman-volume"])
def one_per_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
                 ) -> Iterator[str]:
    yield from using_engine(request, monkeypatch)


def test_every_attribute_commit_applies_is_one_the_review_recorded(
        ws, project: Path, one_per_mode: str):
    cli = engine_cli(one_per_mode)
    (project / "out").mkdir()
    ws("run", "--", "sh", "-c", BEFORE + _later("\n".join(AFTER.values())), check=True)
    ws("status", "--no-pager", check=True)
    release(cli, "/dev/shm/done", what="the background process never ran")
    missed = []
    for name in AFTER:
        path = project / "out" / name
        proc = ws("commit", "--allow-special", str(path))
        if proc.returncode == 0 or str(path) not in proc.stderr or "review again" not in proc.stderr:
            missed.append(f"{name}: exit {proc.returncode}: {proc.stderr.strip()}")
        assert _entry(path) is None, f"{name} was applied: {_entry(path)}"
    assert not missed, "\n".join(missed)
    _old_record(ws, project)
    proc = ws("commit", "--allow-special")
    assert proc.returncode != 0 and "review again" in proc.stderr, proc.stderr
    assert not (project / "out" / "ok.txt").exists()
    # Refused, not stuck: what a new review shows is what commit applies.
    ws("status", "--no-pager", check=True)
    ws("commit", "--allow-special", check=True)
    assert os.readlink(project / "out" / "link") == "/etc/hostname"
    assert stat.S_IMODE(os.lstat(project / "out" / "run.sh").st_mode) == 0o755
    assert (project / "out" / "d2f").read_text() == "evil\n"
