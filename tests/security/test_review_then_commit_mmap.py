"""attack5: a write through a shared mapping after the review is committed unseen.

Commit refuses an upper entry whose ctime is later than the last review and the last call's
end (session/reviewed.py). A write through a ``MAP_SHARED`` mapping updates the file's
times only on the write fault of a clean page: a background process that dirtied the page
before the review (the times move then) and writes it again after the review leaves the
ctime where it was (the page is still dirty and writable: no fault, until writeback, ~30 s
later). ``workspace diff`` showed "good", ``workspace commit`` applies "EVIL", no refusal.
The container engines keep a call's background processes by design (docker, podman).
A race with the kernel's writeback (ext4 here: a page written back between the review and
the write makes it fault): it failed in 4 of 6 runs before any fix, as root and as wstest;
a fix (e.g. comparing content with what review read) makes it pass every time.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.engines.conftest import engine_cli
from tests.security.after_review import container_engine  # noqa: F401 - the fixture
from tests.security.after_review import release

pytestmark = [pytest.mark.engine, pytest.mark.as_user]

# Left running by the call: maps out/a.txt, dirties its page and keeps it dirty (a write
# after writeback faults, which moves the times: before the review, harmless), then, at the
# test's signal (given in the container from outside any call), writes the same page.
MAPPED = ("python3 -c 'import mmap, os, time\n"
          "f = open(\"out/a.txt\", \"r+b\"); m = mmap.mmap(f.fileno(), 0)\n"
          "m[0:4] = b\"good\"\n"
          "t = time.time()\n"
          "while not os.path.exists(\"/dev/shm/go\") and time.time() - t < 30:\n"
          "    m[0:4] = b\"good\"; time.sleep(0.005)\n"
          "m[0:4] = b\"EVIL\"; open(\"/dev/shm/done\", \"w\")\n"
          "time.sleep(60)' >/dev/null 2>&1 </dev/null &")



def test_a_mapped_write_after_review_is_not_committed_unseen(ws, project: Path,
                                                             container_engine: str):  # noqa: F811
    cli = engine_cli(container_engine)
    (project / "out").mkdir()
    ws("run", "--", "sh", "-c", "echo aaaa > out/a.txt; " + MAPPED, check=True)
    deadline = time.monotonic() + 30
    while "good" not in ws("diff", "--no-pager", check=True).stdout:   # the page is dirty
        assert time.monotonic() < deadline, "the background process never mapped the file"
        time.sleep(0.1)
    shown = ws("diff", "--no-pager", check=True).stdout               # the review
    assert "+good" in shown and "EVIL" not in shown, shown
    release(cli, "/dev/shm/done", deadline)
    proc = ws("commit")
    committed = (project / "out" / "a.txt").read_text() if (project / "out" / "a.txt").exists() \
        else ""
    assert "EVIL" not in committed, (
        f"commit applied a write made after the review, unseen (commit exit {proc.returncode})")
    assert proc.returncode != 0 and str(project / "out" / "a.txt") in proc.stderr, proc.stderr
    assert "review again" in proc.stderr, proc.stderr
    # Refused, not stuck: the sandbox is stopped now; what a new review shows is committed.
    assert "+EVIL" in ws("diff", "--no-pager", check=True).stdout
    ws("commit", check=True)
    assert (project / "out" / "a.txt").read_text().startswith("EVIL")
