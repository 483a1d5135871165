"""Issue 14, "Identity" and "Other owners": commands in the overlay engine run as the
user's own uid and gid, as outside; the namespace maps the ids the user really has (root:
all of them; an ordinary user: its subordinate ranges); review shows, and commit applies,
the owners a command inside gave.

Each test runs as root ("self") and as the ordinary test user ("ordinary") when pytest
is root; as the ordinary user alone under scripts/test.sh's second pass.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from manager.changes.meta import OVERFLOW_ID
from manager.changes.meta import IdMap
from manager.engines.overlay import engine as overlay
from manager.engines.overlay import ids as overlay_ids
from tests.engines.accounts import Account

pytestmark = pytest.mark.engine


def _mode(account: Account) -> str:
    maps = overlay_ids.recorded(account.sandbox())
    assert maps is not None
    return maps.mode


def _native(account: Account, command: str) -> str:
    proc = account.run(["sh", "-c", command])
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _inside(account: Account, command: str) -> str:
    proc = account.ws("run", "--", "sh", "-c", command)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _status(account: Account) -> dict[str, dict[str, object]]:
    proc = account.ws("status", "--json", check=True)
    return {c["path"]: c for c in json.loads(proc.stdout)["changes"]}


def _as_namespace_root(account: Account, command: str) -> None:
    """What a process the namespace's root runs does (a package manager, given the power)."""
    pid = overlay.holder_pid(account.sandbox())
    assert pid is not None
    proc = account.run(["nsenter", "--preserve-credentials", "-S", "0",
                        f"--user=/proc/{pid}/ns/user", f"--mount=/proc/{pid}/ns/mnt",
                        f"--root=/proc/{pid}/root", "--", "sh", "-c", command])
    assert proc.returncode == 0, proc.stderr


def test_commands_run_as_the_users_own_uid_and_gid(account: Account):
    outside = _native(account, "id -u; id -g; id -un; echo $HOME $USER")
    inside = _inside(account, "id -u; id -g; id -un; echo $HOME $USER")
    assert inside == outside
    # Every group the user has outside it still has (unmapped ones read as nogroup).
    assert len(_inside(account, "id -G").split()) == len(_native(account, "id -G").split())
    # The mapping the user has: root all ids, wstest (setup gives it subuids) its ranges.
    assert _mode(account) == (overlay_ids.FULL if account.uid == 0 else overlay_ids.SUBORDINATE)


def test_commands_have_no_capabilities_an_ordinary_user_lacks(account: Account):
    """Not the namespace's root in disguise: a read-only file stays read-only (for root, as
    natively, it does not)."""
    proc = account.ws("run", "--", "sh", "-c", "echo x > ro && chmod 444 ro && echo y > ro")
    if account.uid == 0:
        assert proc.returncode == 0, proc.stderr
        return
    assert proc.returncode != 0 and "Permission denied" in proc.stderr
    caps = _inside(account, "grep CapEff /proc/self/status").split()[1]
    assert caps == _native(account, "grep CapEff /proc/self/status").split()[1] == "0" * 16


def test_chown_inside_behaves_as_outside_and_review_shows_the_owner(account: Account):
    native = account.run(["sh", "-c", "touch /tmp/ws-ident-$$ && chown 1000:1000 /tmp/ws-ident-$$;"
                                      " s=$?; rm -f /tmp/ws-ident-$$; exit $s"])
    proc = account.ws("run", "--", "sh", "-c", "echo x > f && chown 1000:1000 f && stat -c %u:%g f")
    assert (proc.returncode == 0) == (native.returncode == 0), (proc.stderr, native.stderr)
    if account.uid != 0:
        assert "Operation not permitted" in proc.stderr   # as natively, not EINVAL
        return
    assert proc.stdout == "1000:1000\n"
    upper = account.sandbox() / "upperdir" / str(account.project / "f")[1:]
    assert (upper.stat().st_uid, upper.stat().st_gid) == (1000, 1000)
    assert _status(account)[str(account.project / "f")]["owner"] == "1000:1000"
    long = account.ws("status", check=True).stdout
    assert "[owner 1000:1000]" in long
    assert "owner: 1000:1000" in account.ws("diff", check=True).stdout
    account.ws("commit", check=True)
    real = (account.project / "f").stat()
    assert (real.st_uid, real.st_gid) == (1000, 1000)


def test_an_existing_files_new_owner_is_a_change_and_committed(account: Account):
    """`chown` alone (same bytes, same mode) is pending, and root's commit applies it."""
    proc = account.ws("run", "--", "chown", "1000:1000", "README.txt")
    if account.uid != 0:   # as natively: only root may give a file away
        assert proc.returncode != 0 and "Operation not permitted" in proc.stderr
        assert _status(account) == {}
        return
    assert proc.returncode == 0, proc.stderr
    change = _status(account)[str(account.project / "README.txt")]
    assert (change["kind"], change["owner"]) == ("mode", "1000:1000")
    account.ws("commit", check=True)
    real = (account.project / "README.txt").stat()
    assert (real.st_uid, real.st_gid, (account.project / "README.txt").read_text()) == \
        (1000, 1000, "hello\n")


def test_other_owners_from_subordinate_ids_read_as_inside_and_commit_says_why(account: Account):
    """A file the namespace's root gives to uid 1000 is 100000+1000 on disk for wstest:
    review shows 1000; an ordinary user's commit makes it the user's own and says so.
    Root's namespace maps every id to itself: 1000 on disk, and its commit applies it."""
    _inside(account, "echo x > given")
    _as_namespace_root(account, f"chown 1000:1000 {account.project}/given")
    maps = overlay_ids.recorded(account.sandbox())
    assert maps is not None
    upper = account.sandbox() / "upperdir" / str(account.project / "given")[1:]
    on_disk = next(out + 1000 - first for first, out, count in maps.uid if first <= 1000 < first + count)
    assert upper.stat().st_uid == on_disk and (on_disk == 1000) == (account.uid == 0)
    assert _inside(account, "stat -c %u:%g given") == "1000:1000\n"
    assert _status(account)[str(account.project / "given")]["owner"] == "1000:1000"
    proc = account.ws("commit", "--json")
    assert proc.returncode == 0, proc.stderr
    notes = json.loads(proc.stdout)["notes"]
    if account.uid == 0:
        assert notes == [] and (account.project / "given").stat().st_uid == 1000
        return
    assert [n["path"] for n in notes] == [str(account.project / "given")]
    assert "only root can give a file to another user" in notes[0]["reason"]
    real = (account.project / "given").stat()
    assert (real.st_uid, (account.project / "given").read_text()) == (account.uid, "x\n")


def test_discard_removes_what_the_namespaces_root_made(account: Account):
    """Whiteouts and scaffolding belong to a subordinate id on disk: still removable."""
    (account.project / "gone.txt").write_text("old\n")
    account.chown(account.project / "gone.txt")
    _inside(account, "rm gone.txt; echo new > /tmp/ws-ident-new; echo x > kept")
    account.ws("discard", "--yes", check=True)
    assert _status(account) == {}
    assert (account.project / "gone.txt").read_text() == "old\n"
    # The session's end (gc of a client's session) destroys the sandbox, as the user.
    sandbox = account.sandbox()
    destroy = ("import sys, types; from pathlib import Path; "
               "from manager.engines.overlay.engine import OverlayEngine; "
               "OverlayEngine(None).destroy(types.SimpleNamespace(sandbox=Path(sys.argv[1]), id='t'))")
    proc = account.run([account.python, "-c", destroy, str(sandbox)])
    assert proc.returncode == 0, proc.stderr
    assert not sandbox.exists()


def test_without_newuidmap_the_single_mapping_is_a_warning_not_a_failure(account: Account):
    """No subordinate mapping possible: commands run as the namespace's root (uid 0), as
    before, and doctor says why. Root needs no newuidmap: nothing changes for it."""
    from tests.engines.test_overlay_user import _path_without

    path = _path_without(account, "newuidmap", "newgidmap")
    proc = account.run([account.python, "-m", "manager", "run", "--", "sh", "-c", "id -u; touch f"],
                       env={"PATH": path})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "0\n"   # root: its own uid; the ordinary user: the fallback's root
    maps = overlay_ids.recorded(account.sandbox())
    assert maps is not None
    assert maps.mode == (overlay_ids.FULL if account.uid == 0 else overlay_ids.SINGLE)
    upper = account.sandbox() / "upperdir" / str(account.project / "f")[1:]
    assert upper.stat().st_uid == account.uid          # the user's own file outside
    assert _status(account)[str(account.project / "f")]["owner"] is None
    doctor = account.run([account.python, "-m", "manager", "doctor", "--engine", "overlay", "--json"],
                         env={"PATH": path})
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["engines"]["overlay"]}
    found = checks.get("commands run as")
    assert found is not None and found["ok"], doctor.stdout
    assert ("newuidmap is not installed" in found["detail"]) == (account.uid != 0)


def test_the_subordinate_layout_is_podmans_keep_id(tmp_path: Path):
    """Inside 0.. from the subordinate ranges in order; the user's own id to itself."""
    assert overlay_ids.keep_id(1001, [(100000, 65536)]) == \
        [(0, 100000, 1001), (1001, 1001, 1), (1002, 101001, 64535)]
    assert overlay_ids.keep_id(1001, [(100000, 500), (200000, 1000)]) == \
        [(0, 100000, 500), (500, 200000, 501), (1001, 1001, 1), (1002, 200501, 499)]
    # Fewer subordinate ids than the uid: the user's id still maps, above a gap.
    assert overlay_ids.keep_id(70000, [(100000, 65536)]) == [(0, 100000, 65536), (70000, 70000, 1)]
    # The user's own id inside its own range is never mapped twice.
    assert overlay_ids.keep_id(100005, [(100000, 10)]) == \
        [(0, 100000, 5), (5, 100006, 4), (100005, 100005, 1)]
    subuid = tmp_path / "subuid"
    subuid.write_text("other:300000:65536\nwstest:100000:65536\n1001:200000:10\nbad line\n")
    assert overlay_ids.subordinate(subuid, {"wstest", "1001"}) == [(100000, 65536), (200000, 10)]
    ranges = overlay_ids.keep_id(1001, [(100000, 65536)])
    on_disk = IdMap(tuple(ranges), tuple(ranges))
    assert [on_disk.inside(n, n)[0] for n in (100000, 101000, 1001, 101001, 5)] == \
        [0, 1000, 1001, 1002, OVERFLOW_ID]
