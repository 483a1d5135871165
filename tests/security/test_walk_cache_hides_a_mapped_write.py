"""Attack pass 21 (critical: an unreviewed commit): review's walk cache (``review.cache``,
``changes/walkcache.py``) trusts stat data that a write through a shared mapping does not
move, so a file changed by a call *before* the review is not shown, and commit applies it.

``status`` and ``diff`` read the changes through ``sandbox.pending``, which reuses a file's
verdict while both its entries' inode, mode, size, mtime and ctime are unchanged ("a
sandboxed edit moves the upper entry's ctime ... neither can be set back"). Not so through a
shared mapping: the times move on the write fault of a clean page only, so bytes written into
a page already dirty move nothing until writeback (~30 s on ext4). The review record
(``session/shown.py``) is made from the same ``pending``, and commit's check of it asks
``pending`` again: a file the cache calls unchanged is neither shown, nor recorded, nor
refused; ``commit_session`` then reads the changes itself, without the cache, finds the file
modified and copies it. docs/security.md knows the mapping's trick (attack pass 5: the record of
digests closed it for the review's own reads) but not that the cache skips the read.

Reproduction (overlay engine, every account): a call (the agent's ``run_in_background``, or
any call still running while a review happens: the hooks' own walks use ``pending`` too)
opens ``data.txt`` read-write (its copy-up, the same bytes as the real file) and maps it
shared; it writes the same bytes into the page (the fault moves the times) and waits. A walk
more than 2 s later (``workspace status``) records the file's verdict: no change. The call
writes ``EVIL`` into the still-dirty page and ends. Now, with no call running,
``workspace status`` and ``workspace diff`` show nothing for ``data.txt``; ``workspace
commit`` writes ``EVIL`` into the real file.

Rule broken: what commit applies is what review showed. Rule that would close the class:
commit's check covers what commit itself applies, read as commit reads it (no cache: every
entry commit copies must be one the record holds, with its digest), and a cache may only
skip work whose result is checked again where it matters; or the cache is keyed on what a
mapping cannot leave unchanged (none of the stat data qualifies: only the content).
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.engines import accounts
from tests.security.two_sessions import ID_SETUPS
from tests.security.two_sessions import account_for
from tests.security.two_sessions import say
from tests.security.two_sessions import wait_line

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

SIZE = 4096
# The background call: the same bytes into a shared mapping (copy-up, times moved by the
# fault), then, when told, EVIL into the still-dirty page (no fault: no time moves).
MAPPED = """
import mmap, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind("\\0" + sys.argv[1])
s.listen(1)
fd = os.open("data.txt", os.O_RDWR)
m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
m[0:4] = b"AAAA"
print("dirty", flush=True)
c, _ = s.accept()
c.recv(10)
m[0:4] = b"EVIL"
print("wrote", flush=True)
"""


@pytest.mark.parametrize("ids", ID_SETUPS)
def test_a_mapped_write_before_review_is_not_committed_unseen(ids: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    data = account.project / "data.txt"
    data.write_bytes(b"A" * SIZE)
    account.chown(data)
    name = f"ws-attack21-{uuid.uuid4().hex[:12]}"
    full = account.env(**env)
    call = subprocess.Popen(
        [*account.prefix, "env", *(f"{k}={v}" for k, v in full.items()), account.python, "-m",
         "manager", "run", "--", "python3", "-c", MAPPED, name],
        cwd=account.project, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_line(call, "dirty")
        time.sleep(3)   # the cache records nothing changed in the last 2 s
        account.ws("status", env=env, check=True)   # a walk while the call runs (a hook's too)
        say(name)
        wait_line(call, "wrote")
        call.communicate(timeout=60)
        # The review, with nothing running any more.
        review = json.loads(account.ws("status", "--json", env=env, check=True).stdout)
        assert not review.get("running"), review
        shown = [c.get("path") for c in review.get("changes", [])]
        diff = account.ws("diff", env=env, check=True).stdout
        done = account.ws("commit", str(data), env=env, timeout=120)
        real = data.read_bytes()
        seen = any("data.txt" in str(p) for p in shown) or "data.txt" in diff
        assert seen or real[:4] != b"EVIL", (
            f"commit wrote {real[:4]!r} into the real data.txt though the review after the "
            f"last call showed no change to it (status: {shown}; diff: {diff!r}); commit "
            f"said: {done.stdout}{done.stderr}")
        if not seen:   # refused, naming it; the next review reads it afresh and shows it
            assert done.returncode != 0 and "data.txt" in done.stderr, done
            again = account.ws("diff", env=env, check=True).stdout
            assert "EVIL" in again, again
            done = account.ws("commit", str(data), env=env, timeout=120)
            assert done.returncode == 0 and data.read_bytes()[:4] == b"EVIL", done
    finally:
        if call.poll() is None:
            call.kill()
            call.wait(timeout=10)
        accounts.clean(account)
