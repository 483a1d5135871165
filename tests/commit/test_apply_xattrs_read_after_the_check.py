"""Attack pass 22: commit reads a file's xattrs after its last fingerprint check, so a
capability set at that moment is committed without ``--allow-special``.

``steps._copy_file`` checks the upper entry against what the plan judged before the copy
and again after its data (``judged.same_while_read``), then sets the copy's owner, mode and
times and only then copies the xattrs from the source descriptor (``copy_xattrs(src,
dst)``). Setting ``security.capability`` moves the ctime, but nothing looks at it again. The
same holds for a symlink (its xattrs copied after its check), a fifo or socket (no check
after ``mknod``), and every file of a tree step (``trees._copy_dir`` -> ``_copy_entry``).

The attack needs a writer during the commit (test_apply_judged.py's own model of one: a
live writer, which the in-use probe otherwise keeps out; the container engines' overlays are
not probed). Here it sets a capability on ``tool`` while commit copies its xattrs: the plan
judged a plain 0755 file, the real ``tool`` gets ``cap_net_raw``, and no ``--allow-special``
was given.

Promise broken: nothing unjudged (a file with capabilities without ``--allow-special``)
becomes real; commit copies only what its plan judged.

Rule that would close the class: everything copied from the entry (data, xattrs, mode,
owner) is read between the two checks on the one descriptor: the last check comes after the
last read (or the xattrs are read first, before the data, and the check after covers them).
"""

from __future__ import annotations

import os
import shutil
import struct

import pytest

from manager.commit import apply
from manager.commit import steps
from tests.overlay_model import Tree
from tests.overlay_model import write

pytestmark = pytest.mark.needs_root
CAPABILITY = "security.capability"
NET_RAW = struct.pack("<IIIII", 0x02000001, 1 << 13, 0, 0, 0)   # v2, effective: cap_net_raw


def test_a_capability_set_while_commit_copies_xattrs_is_not_committed(
        tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tree.r("tool"), "real\n", mode=0o755)
    tree.u("tool").parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(tree.r("tool"), tree.u("tool"))
    tree.u("tool").write_text("judged\n")
    real_copy = steps.copy_xattrs
    done: list[bool] = []

    def set_then_copy(src: str | int, dst: str | int) -> None:
        if not done:   # the live writer, after the last check
            os.setxattr(tree.u("tool"), CAPABILITY, NET_RAW)
            done.append(True)
        real_copy(src, dst)

    monkeypatch.setattr(steps, "copy_xattrs", set_then_copy)
    result = apply.commit(tree.session, tree.layers, tree.real)
    assert done
    try:
        caps = os.getxattr(tree.r("tool"), CAPABILITY)
    except OSError:
        caps = None
    assert caps is None, (
        f"the real tool has file capabilities {caps!r}, set after commit's last check and "
        f"committed without --allow-special: {result.as_json()}")
