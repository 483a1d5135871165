"""The built-in overlay engine from an ordinary account, and as pytest's own user.

Each test runs twice when pytest is root: as root ("self") and as the ordinary
test user through ``runuser`` ("ordinary"). Run as an ordinary user, pytest tests
that user ("self").
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import threading
import time
from pathlib import Path

import pytest

from manager.engines.overlay import engine as overlay
from manager.engines.overlay.holder import mountinfo
from tests.engines.accounts import Account

pytestmark = pytest.mark.engine


def _upper(account: Account, path: Path) -> Path:
    return account.sandbox() / "upperdir" / str(path)[1:]


def _changes(account: Account) -> dict[str, str]:
    proc = account.ws("status", "--json", check=True)
    return {c["path"]: c["kind"] for c in json.loads(proc.stdout)["changes"]}


def _entry(account: Account, cwd: Path, command: str) -> list[str]:
    """The lean per-call entry, as the plugin emits it."""
    sandbox = account.sandbox()
    return ["/bin/bash", str(overlay.ENTER_SCRIPT), str(sandbox), sandbox.parent.name,
            account.python, str(cwd), "", command]


# -- 1. every call enters ----------------------------------------------------

def test_calls_enter_and_write_as_this_user(account: Account):
    proc = account.ws("run", "--", "sh", "-c", "echo hi > f && cat f")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "hi\n", "")
    assert _upper(account, account.project / "f").stat().st_uid == account.uid
    lean = account.run(_entry(account, account.project, "echo lean > g && cat g README.txt"))
    assert (lean.returncode, lean.stdout, lean.stderr) == (0, "lean\nhello\n", "")
    assert not (account.project / "g").exists()
    assert _changes(account) == {str(account.project / "f"): "added",
                                 str(account.project / "g"): "added"}


# -- 2. directories the user cannot read ---------------------------------------

def _unreadable_with_mounts_below() -> Path | None:
    """A directory on this host that this user cannot list and that has mounts below it."""
    points = [Path(point) for point in mountinfo.points(mountinfo.read())]
    for point in points:
        for parent in reversed(point.parents):
            if parent != Path("/") and not os.access(parent, os.R_OK | os.X_OK):
                return parent
    return None


@pytest.mark.needs_root   # as root, its [ordinary] case runs it as the test user
def test_unreadable_directories_with_mounts_below_are_shown_not_fatal(account: Account):
    """E.g. /run/docker (0700) while a container runs: present inside, contents out of reach."""
    if os.geteuid() == 0:
        locked = account.base / "locked"
        (locked / "m").mkdir(parents=True)
        os.chmod(locked, 0o700)
        # The mount exists only in a private mount namespace, where the holder starts.
        outer = ["unshare", "--mount", "--", "sh", "-c", 'mount -t tmpfs tmpfs "$0" && exec "$@"',
                 str(locked / "m")]
    else:
        found = _unreadable_with_mounts_below()
        if found is None:
            pytest.skip("no unreadable directory with mounts below here; making one needs root")
        locked, outer = found, []
    script = f"ls -A {locked} 2>/dev/null; touch {locked}/new 2>/dev/null && echo wrote || echo refused"
    proc = account.ws("run", "--", "sh", "-c", script, outer=outer)
    assert proc.returncode == 0, proc.stderr
    if account.uid == 0:
        assert proc.stdout == "m\nwrote\n"
        assert not (locked / "new").exists()
    else:
        assert proc.stdout == "refused\n"
        log = (account.sandbox() / "mount.log").read_text()
        assert f"{locked}: not readable by this user" in log


@pytest.mark.needs_root   # as root, its [ordinary] case runs it as the test user
def test_a_project_below_a_directory_of_another_owner(account: Account):
    """/work/shared/proj, /work/shared root's and proj the user's: overlayfs cannot copy
    root's directory up in the user's namespace, so the holder prepares the project's path."""
    shared = account.base / "shared"
    project = shared / "proj"
    project.mkdir(parents=True)
    account.chown(project)
    if account.uid != 0 and shared.stat().st_uid == account.uid:
        pytest.skip("pytest runs as an ordinary user: a directory of another owner needs root")
    proc = account.ws("run", "--", "sh", "-c", "echo x > f && mkdir d && echo y > d/g", cwd=project)
    assert proc.returncode == 0, proc.stderr
    changes = account.ws("status", "--json", cwd=project, check=True).stdout
    assert {c["path"]: c["kind"] for c in json.loads(changes)["changes"]} == {
        str(project / "f"): "added", str(project / "d"): "added", str(project / "d/g"): "added"}
    account.ws("commit", cwd=project, check=True)
    assert (project / "d/g").read_text() == "y\n"
    assert (project / "d/g").stat().st_uid == account.uid


# -- 3. doctor: works only after a real call -----------------------------------

def _overlay_checks(account: Account, **env: str) -> tuple[list[dict[str, object]], object]:
    # Only overlay's checks (the others probe real containers); the choice is auto's all the same.
    proc = account.ws("doctor", "--engine", "overlay", "--json",
                      env={"WORKSPACE_ENGINE": "auto", **env})
    assert proc.stdout, proc.stderr
    report = json.loads(proc.stdout)
    return report["engines"]["overlay"], report["chosen"]["engine"]


def test_doctor_says_works_after_a_real_call(account: Account):
    # try installed or not: auto chooses overlay first (try is not a security boundary).
    checks, chosen = _overlay_checks(account)
    trial = [c for c in checks if c["name"] == overlay.TRIAL_CHECK]
    assert trial and trial[0]["ok"] and trial[0]["detail"] == "works", checks
    assert all(c["ok"] for c in checks), checks
    assert chosen == "overlay"
    assert not list(account.state.glob("workspace/probe/*")), "the trial sandbox was left behind"
    assert not _holders(account.base)


def _holders(base: Path) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if bytes(overlay.HOLDER_PROGRAM) in cmdline and str(base).encode() in cmdline:
            found.append(pid)
    return found


def _path_without(account: Account, *tools: str) -> str:
    """A PATH with every tool of this one except ``tools``."""
    bin_dir = account.base / f"bin-without-{'-'.join(tools)}"
    bin_dir.mkdir()
    for directory in os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for name in os.listdir(directory):
            target = bin_dir / name
            if name not in tools and not target.exists() and os.access(Path(directory, name), os.X_OK):
                target.symlink_to(Path(directory, name))
    return str(bin_dir)


OLD_NSENTER = """#!/bin/sh
# nsenter as util-linux < 2.26 has it: no --preserve-credentials
for arg; do
    if [ "$arg" = --preserve-credentials ]; then
        echo "nsenter: unrecognized option '--preserve-credentials'" >&2
        exit 1
    fi
done
exec {real} "$@"
"""


@pytest.mark.parametrize("breakage", ["nsenter missing", "nsenter without --preserve-credentials"])
def test_doctor_and_run_report_a_broken_nsenter(account: Account, breakage: str):
    path = _path_without(account, "nsenter", "try")
    if breakage != "nsenter missing":
        shim = Path(path) / "nsenter"
        shim.write_text(OLD_NSENTER.format(real=shutil.which("nsenter")))
        shim.chmod(0o755)
    checks, chosen = _overlay_checks(account, PATH=path)
    failed = [c for c in checks if not c["ok"]]
    assert failed and "nsenter" in f"{failed[0]['name']} {failed[0]['detail']}", checks
    assert failed[0]["fix"], checks
    assert chosen != "overlay"
    proc = account.ws("run", "--", "sh", "-c", "echo x > f", env={"PATH": path})
    assert proc.returncode == 125 and "nsenter" in proc.stderr, proc.stderr
    assert not (account.project / "f").exists()


def test_doctor_and_run_report_an_unusable_state_directory(account: Account):
    state = account.base / "state-is-a-file"
    state.write_text("")
    account.chown(state)
    checks, chosen = _overlay_checks(account, XDG_STATE_HOME=str(state),
                                     PATH=_path_without(account, "try"))
    failed = [c for c in checks if not c["ok"]]
    assert failed and str(state) in str(failed[0]["detail"]) and failed[0]["fix"], checks
    assert chosen != "overlay"
    proc = account.ws("run", "--", "true", env={"XDG_STATE_HOME": str(state)})
    assert proc.returncode == 125 and str(state) in proc.stderr, proc.stderr


# -- 4. a directory the sandbox has not seen yet -------------------------------

def test_a_directory_made_after_the_holder_started_is_seen(account: Account):
    late = account.base / "late"
    # Looked up inside first: overlayfs remembers that it was missing.
    probe = account.ws("run", "--", "sh", "-c", f"test -d {late} && echo seen || echo missing")
    assert probe.stdout == "missing\n", probe.stderr
    late.mkdir()
    account.chown(late)
    proc = account.ws("run", "--cwd", str(late), "--", "sh", "-c", "pwd && echo x > made-here")
    assert (proc.returncode, proc.stdout.strip()) == (0, str(late)), proc.stderr
    assert _changes(account) == {str(late / "made-here"): "added"}


def test_the_lean_entry_hands_an_unseen_directory_over(account: Account):
    late = account.base / "late-lean"
    account.ws("run", "--", "sh", "-c", f"test -d {late} || true", check=True)
    late.mkdir()
    account.chown(late)
    proc = account.run(_entry(account, late, "pwd && echo x > made-here"))
    assert (proc.returncode, proc.stdout.strip()) == (0, str(late)), proc.stderr
    assert _changes(account) == {str(late / "made-here"): "added"}


def test_a_missing_directory_is_an_error_never_another_directory(account: Account):
    missing = account.base / "nowhere"
    for proc in (account.ws("run", "--cwd", str(missing), "--", "sh", "-c", "echo x > f"),
                 account.run(_entry(account, missing, "echo x > f"))):
        assert proc.returncode == 125, proc.stderr
        assert f"{missing} does not exist" in proc.stderr
    assert _changes(account) == {}


def test_an_unseen_directory_while_calls_run_is_an_error(account: Account):
    late = account.base / "late-busy"
    account.ws("run", "--", "sh", "-c", f"test -d {late} || true", check=True)
    busy = account.popen([account.python, "-m", "manager", "run", "--", "sleep", "30"])
    try:
        sandbox = account.sandbox()
        pid = overlay.holder_pid(sandbox)
        _wait(lambda: pid is not None and overlay.namespace_members(pid, sandbox))
        late.mkdir()
        account.chown(late)
        proc = account.ws("run", "--cwd", str(late), "--", "sh", "-c", "echo x > f")
        assert proc.returncode == 125, proc.stderr
        assert str(late) in proc.stderr and "running" in proc.stderr
        assert _changes(account) == {}
    finally:
        busy.kill()
        busy.wait()


def _wait(predicate, timeout: float = 30) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)


# -- 5. exit 125 for sandbox failures; ownership after commit -------------------

def test_a_holder_that_cannot_start_exits_125(account: Account):
    path = _path_without(account, "mount")
    proc = account.ws("run", "--", "sh", "-c", "echo x > f", env={"PATH": path})
    assert proc.returncode == 125, proc.stderr
    assert "could not start" in proc.stderr and "mount" in proc.stderr
    assert not (account.project / "f").exists()


def test_commit_leaves_the_users_own_files_and_modes(account: Account):
    script = ("mkdir -p d/e && echo x > d/e/f && printf '#!/bin/sh\\necho ran\\n' > run.sh && "
              "chmod 750 d && chmod 705 d/e && chmod 640 d/e/f && chmod 755 run.sh")
    account.ws("run", "--", "sh", "-c", script, check=True)
    account.ws("commit", check=True)
    project = account.project
    expected = {project / "d": 0o750, project / "d/e": 0o705, project / "d/e/f": 0o640,
                project / "run.sh": 0o755}
    for path, mode in expected.items():
        st = path.stat()
        assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (account.uid, account.gid, mode), path
    assert account.run([str(project / "run.sh")]).stdout == "ran\n"
    assert _changes(account) == {}


DESTROY = """
import sys
from manager.session.context import Context
ctx = Context.load(sys.argv[1])
session = ctx.session()
ctx.engine(session).destroy(session)
"""


def test_destroy_removes_what_the_sandbox_made(account: Account):
    """overlayfs leaves its work directories mode 0000: the user must still remove them."""
    account.ws("run", "--", "sh", "-c", "mkdir -p d && echo x > d/f && rm README.txt", check=True)
    sandbox = account.sandbox()
    proc = account.run([account.python, "-c", DESTROY, str(account.project)])
    assert proc.returncode == 0, proc.stderr
    assert not sandbox.exists()


# -- 6. parallel calls ------------------------------------------------------------

def test_parallel_calls_never_report_a_false_not_running(account: Account):
    """Holders retire when the real project changes; calls that race it start a new one."""
    account.ws("run", "--", "true", check=True)
    stop = threading.Event()

    def churn() -> None:
        i = 0
        while not stop.is_set():
            (account.project / f"outside-{i % 3}").write_text(str(i))
            i += 1
            time.sleep(0.05)

    toucher = threading.Thread(target=churn)
    toucher.start()
    try:
        calls = [account.popen([account.python, "-m", "manager", "run", "--", "sh", "-c",
                                f"echo {i} > par-{i}.txt"], stdout=-1, stderr=-1) for i in range(24)]
        results = [(c.wait(timeout=300), c.stderr.read() if c.stderr else "") for c in calls]
    finally:
        stop.set()
        toucher.join()
    assert [rc for rc, _ in results] == [0] * 24, results
    assert not [err for _, err in results if err], results
    changes = _changes(account)
    assert all(changes.get(str(account.project / f"par-{i}.txt")) == "added" for i in range(24))


RACE = """
import os, signal, sys
from manager.engines.overlay import engine as overlay
from manager.engines.base import RunRequest
from manager.session.context import Context
ctx = Context.load(sys.argv[1])
session = ctx.session()
engine = ctx.engine(session)
request = RunRequest(command="echo ran > raced", cwd=sys.argv[1])

def holder_goes():  # between a call's prepare and its entry (idle exit, retired, killed)
    engine.prepare(session)
    pid = overlay.holder_pid(session.sandbox)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)

holder_goes()
assert engine.run(session, request) == 0
if hasattr(engine, "_enter"):  # the entry itself: the reason goes to the CLI only
    holder_goes()
    status, why = engine._enter(session, request)
    assert status == 125 and why and "not running" in why, (status, why)
    assert engine.run(session, request) == 0
"""


def test_a_holder_gone_between_prepare_and_entry_is_retried_quietly(account: Account):
    """The not-entered reason reaches the CLI, not the user; the call then succeeds."""
    account.ws("run", "--", "true", check=True)
    overlay_pid = overlay.holder_pid(account.sandbox())
    assert overlay_pid is not None
    os.kill(overlay_pid, 9)
    proc = account.run([account.python, "-c", RACE, str(account.project)])
    assert (proc.returncode, proc.stderr) == (0, "")
    assert _changes(account) == {str(account.project / "raced"): "added"}


# -- 7. outside changes in a snapshotted directory ---------------------------------

def _snapshotted_level(account: Account) -> tuple[Path, list[str]]:
    """A directory the holder must snapshot (a skeleton level), and the wrapper that makes it one.

    A directory with a mount below it cannot be an overlay lower layer in a user namespace:
    the holder copies its entries one level deep. No host directory is reliably both such a
    directory and writable by the test user, so the test makes one: a tmpfs on ``level/sub``
    in a private mount namespace in which the first call starts the holder (the holder's
    namespace keeps it; later calls enter the holder from here). Root needs only a mount
    namespace; an ordinary user gets one through a user namespace, then maps back to its own
    uid (a nested namespace), so the CLI and the holder run as that user, as they do normally.
    """
    level = account.base / "level"
    (level / "sub").mkdir(parents=True)
    account.chown(level, level / "sub")
    mount = 'mount -t tmpfs tmpfs "$0"'
    if os.geteuid() == 0:
        return level, ["unshare", "--mount", "--", "sh", "-c", f'{mount} && exec "$@"', str(level / "sub")]
    back = f"unshare --user --map-user={os.getuid()} --map-group={os.getgid()} --"
    return level, ["unshare", "--user", "--map-root-user", "--mount", "--", "sh", "-c",
                   f'{mount} && exec {back} "$@"', str(level / "sub")]


def _write(account: Account, path: Path, text: str) -> None:
    path.write_text(text)
    account.chown(path)


def test_outside_changes_in_a_snapshotted_directory_reach_the_next_call(account: Account):
    """The agent's Write tool makes /tmp/x.sh, the next Bash call runs it; `sed -i` outside is
    seen; the holder is not restarted for it; what the sandbox wrote there stays its own."""
    level, outer = _snapshotted_level(account)
    for name, text in (("edited.txt", "a\n"), ("replaced.sh", "echo v1\n"), ("removed.txt", "x\n"),
                       ("mine.txt", "theirs\n")):
        _write(account, level / name, text)
    first = account.ws("run", "--", "sh", "-c",
                       f"cd {level} && cat edited.txt && sh replaced.sh && "
                       f"{{ cat new.sh newdir/f 2>/dev/null || true; }} && echo mine > mine.txt",
                       outer=outer)
    assert (first.returncode, first.stdout) == (0, "a\nv1\n"), first.stderr
    skeleton = account.sandbox() / "skeleton" / str(level)[1:]
    assert (skeleton / "edited.txt").is_file(), "the test's directory is not snapshotted"
    pid = overlay.holder_pid(account.sandbox())

    _write(account, level / "new.sh", "echo new\n")
    with open(level / "edited.txt", "r+", encoding="utf-8") as f:   # in place: same inode
        f.write("b")
    subprocess.run(["sed", "-i", "s/v1/v2/", str(level / "replaced.sh")], check=True)
    (level / "removed.txt").unlink()
    (level / "newdir").mkdir()
    _write(account, level / "newdir" / "f", "in newdir\n")
    account.chown(level / "newdir")
    _write(account, level / "mine.txt", "theirs again\n")

    script = (f"cd {level} && sh new.sh && cat edited.txt && sh replaced.sh && "
              "cat newdir/f mine.txt && { test -e removed.txt && echo still there || echo removed; } && "
              "ls")
    expected = "new\nb\nv2\nin newdir\nmine\nremoved\n" + "".join(
        f"{n}\n" for n in sorted(["edited.txt", "mine.txt", "new.sh", "newdir", "replaced.sh", "sub"]))
    lean = account.run(_entry(account, account.project, script))   # the plugin's path
    assert (lean.returncode, lean.stdout, lean.stderr) == (0, expected, "")
    subprocess.run(["sed", "-i", "s/v2/v3/", str(level / "replaced.sh")], check=True)
    again = account.ws("run", "--", "sh", "-c", f"sh {level}/replaced.sh")    # the CLI's path
    assert (again.returncode, again.stdout) == (0, "v3\n"), again.stderr
    assert overlay.holder_pid(account.sandbox()) == pid, "freshness must not restart the holder"
    assert (level / "mine.txt").read_text() == "theirs again\n"
    assert _changes(account) == {str(level / "mine.txt"): "modified"}


def test_what_a_refresh_cannot_show_is_written_to_mount_log(account: Account):
    """A directory appears outside, in a snapshotted directory, that cannot be overlaid (a
    ':' in its name separates overlayfs's layers): the call that brings the sandbox up to date
    says so in mount.log, as the holder's first build does for what it cannot show."""
    level, outer = _snapshotted_level(account)
    first = account.ws("run", "--", "sh", "-c", f"ls {level}", outer=outer)
    assert (first.returncode, first.stdout) == (0, "sub\n"), first.stderr
    odd = level / "a:b"
    odd.mkdir()
    account.chown(odd)
    seen = account.ws("run", "--", "sh", "-c", f"ls {level}")
    assert (seen.returncode, seen.stdout) == (0, "a:b\nsub\n"), seen.stderr
    log = (account.sandbox() / "mount.log").read_text()
    assert f"{odd}: appeared after the sandbox started and cannot be shown" in log, log


def test_a_large_file_made_outside_in_a_snapshotted_directory_is_bound(account: Account):
    """Larger than a skeleton copies, it is bound from the real filesystem, which the holder
    reaches only from the host's mount namespace (it lives in the pivoted one)."""
    level, outer = _snapshotted_level(account)
    account.ws("run", "--", "true", outer=outer, check=True)
    pid = overlay.holder_pid(account.sandbox())
    big = level / "big.bin"
    _write(account, big, "start" + "x" * (2 << 20))
    seen = account.ws("run", "--", "sh", "-c", f"head -c 5 {big}; wc -c < {big}")
    assert (seen.returncode, seen.stdout) == (0, f"start{5 + (2 << 20)}\n"), seen.stderr
    assert overlay.holder_pid(account.sandbox()) == pid


def test_parallel_calls_see_a_snapshotted_directory_that_keeps_changing(account: Account):
    """Calls ask for the latest state while others run and while files change outside: each
    one sees at least what was written before it started, none fails, the holder stays."""
    level, outer = _snapshotted_level(account)
    _write(account, level / "counter", "0\n")
    account.ws("run", "--", "true", outer=outer, check=True)
    pid = overlay.holder_pid(account.sandbox())
    written = [0]
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            tmp = level / "counter.tmp"
            _write(account, tmp, f"{written[0] + 1}\n")
            os.replace(tmp, level / "counter")
            written[0] += 1
            time.sleep(0.01)

    toucher = threading.Thread(target=churn)
    toucher.start()
    try:
        calls = []
        for _ in range(12):
            floor = written[0]
            calls.append((floor, account.popen(_entry(account, account.project, f"cat {level}/counter"),
                                               stdout=-1, stderr=-1)))
            time.sleep(0.02)
        results = [(floor, c.wait(timeout=300), c.stdout.read() if c.stdout else "",
                    c.stderr.read() if c.stderr else "") for floor, c in calls]
    finally:
        stop.set()
        toucher.join()
    assert all(rc == 0 and not err and int(out) >= floor for floor, rc, out, err in results), results
    assert overlay.holder_pid(account.sandbox()) == pid
