"""The try engine: interface detection, quoting, a reused sandbox, interop with try itself.

Parsing tests run everywhere on recorded usage text. Tests against the real
binpash/try run once per form (main: ``-N DIR``, v0.2.0: ``-D DIR``; see
tryforms): locally a missing form skips with the reason, in CI it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from manager import config
from manager.engines.try_ import layout as try_layout
from manager.engines.try_ import probe as try_probe
from tests.engines import tryforms
from tests.engines.conftest import try_unavailable

USAGE_V020 = """\
Usage: try [-nvhy] [-i PATTERN] [-D DIR] [-U PATH] CMD [ARG ...]

  -n                don't prompt for commit
  -y                assume yes to all prompts (implies -n is not used)
  -i PATTERN        ignore paths that match PATTERN on summary and commit
  -D DIR            work in DIR (implies -n)
  -U PATH           path to unionfs helper (e.g., mergerfs, unionfs-fuse)

  -v                show version information (and exit)
  -h                show this usage message (and exit)
"""

USAGE_MAIN = (
    "Usage: try [-nvhyx] [-E PATTERN] [-I PATTERN] [-i PATH] [-t PATH] [-N DIR] [-U PATH] "
    "[-L dir1:dir2:...] CMD [ARG ...]\n"
) + """
  -n                don't commit or prompt for commit (overrides -y)
  -i PATH           hide PATH inside the sandbox
  -N DIR            work in DIR (implies -n)
  -L dir1:dir2:...  specify multiple lower directories to merge (colon-separated, implies -n)
  -v                show version information (and exit)
  -h                show this usage message (and exit)
"""


# -- parsing (always runs) ------------------------------------------------------

@pytest.mark.parametrize(("text", "flag"), [(USAGE_V020, "-D"), (USAGE_MAIN, "-N"),
                                            ("Usage: try [-nvhy] CMD\n  -n  no\n", None),
                                            ("", None)])
def test_interface_is_read_from_usage_text(text: str, flag: str | None):
    assert try_probe.parse_usage(text) == flag


def test_version_is_read_but_not_trusted():
    assert try_probe.parse_version("try version 0.2.0\n") == "0.2.0"
    assert try_probe.parse_version("nonsense") == "unknown"


def _fake_try(tmp_path: Path, usage: str, run: str = "exit 0") -> Path:
    script = tmp_path / "bin/try"
    script.parent.mkdir(exist_ok=True)
    script.write_text("#!/bin/sh\n"
                      f'case "$1" in -h) cat >&2 <<"EOF"\n{usage}EOF\n exit 0;;\n'
                      '-v) echo "try version 9.9" >&2; exit 0;;\n'
                      f"esac\n{run}\n")
    script.chmod(0o755)
    return script


def test_detection_runs_the_script_and_caches_until_it_changes(tmp_path: Path):
    script = _fake_try(tmp_path, USAGE_V020)
    cache = tmp_path / "try.json"
    info = try_probe.cached(script, cache)
    assert (info.flag, info.version) == ("-D", "9.9")
    _fake_try(tmp_path, USAGE_MAIN + "\n" * 3)  # a new script: other size
    assert try_probe.cached(script, cache).flag == "-N"


def test_a_try_with_an_unknown_interface_is_refused_with_the_reason(tmp_path: Path):
    script = _fake_try(tmp_path, "Usage: try [-x] CMD\n")
    found = try_probe.checks(str(script))
    failed = [c for c in found if not c.ok]
    assert failed and "neither -N DIR nor -D DIR" in failed[0].detail
    assert failed[0].fix


def test_a_missing_try_says_how_to_install_it(tmp_path: Path):
    found = try_probe.checks(str(tmp_path / "nowhere/try"))
    assert [c.ok for c in found] == [False, True]   # and what try would not give, said anyway
    assert "binpash/try" in found[0].fix
    assert found[1] is try_probe.NOT_A_BOUNDARY


def _overlay_works() -> str | None:
    from manager.engines.overlay.engine import OverlayEngine

    return OverlayEngine(config.load(None)).health_check()


def test_auto_chooses_overlay_before_any_try(ws, project: Path, tmp_path: Path):
    """try is not a security boundary: where the overlay engine works, auto never gets to
    try, whatever try is installed (a broken one here: it is not even looked at)."""
    if reason := _overlay_works():
        pytest.skip(f"the overlay engine cannot run here: {reason}")
    script = _fake_try(tmp_path, "Usage: try [-x] CMD\n")
    _user_config(tmp_path, f"try:\n  path: {script}\n")   # a project file needs trust
    ws("run", "--", "true", check=True)
    session = json.loads(ws("sessions", "--json", check=True).stdout)["sessions"][0]
    assert (session["engine"], session["engine_source"]) == ("overlay", "auto (default)")
    assert not any("try:" in n for n in session["notes"])


def test_auto_with_the_real_try_installed_gives_the_users_own_identity(ws, project: Path,
                                                                      tmp_path: Path):
    """With binpash/try installed (as setup installs it), auto is the overlay engine: the
    caller's own uid inside, and an archive with foreign owners unpacks (try runs every
    command as root: "Cannot change ownership ... Invalid argument")."""
    if reason := _overlay_works():
        pytest.skip(f"the overlay engine cannot run here: {reason}")
    if shutil.which("try") is None:
        pytest.skip("binpash/try is not installed (scripts/setup.d installs it)")
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "data.txt").write_text("payload\n")
    archive = project / "foreign.tar.gz"
    subprocess.run(["tar", "czf", str(archive), "--owner=12345", "--group=12345", "-C", str(tree),
                    "pkg"], check=True)
    proc = ws("run", "--", "sh", "-c", "id -u && tar xzf foreign.tar.gz && cat pkg/data.txt",
              check=True)
    assert proc.stdout == f"{os.geteuid()}\npayload\n", proc.stderr
    session = json.loads(ws("sessions", "--json", check=True).stdout)["sessions"][0]
    assert (session["engine"], session["engine_source"]) == ("overlay", "auto (default)")


def test_try_failing_before_the_command_is_reported_with_its_output(ws, project: Path,
                                                                    tmp_path: Path):
    if reason := _overlay_works():  # the same namespaces wrap try
        pytest.skip(f"user namespaces unavailable: {reason}")
    script = _fake_try(tmp_path, USAGE_MAIN, run='echo "given sandbox is invalid" >&2; exit 1')
    _user_config(tmp_path, f"try:\n  path: {script}\n")   # a project file needs trust
    proc = ws("run", "--engine", "try", "--", "echo", "never")
    assert proc.returncode == 125
    assert "try failed before running the command" in proc.stderr
    assert "given sandbox is invalid" in proc.stderr
    assert "never" not in proc.stdout


# -- against the real try, both forms ---------------------------------------------------

@pytest.mark.parametrize("form", list(tryforms.FORMS))
def test_detection_of_a_real_try(form: str):
    script = tryforms.require(form)
    info = try_probe.inspect(script)
    getopts = re.search(r'getopts\s+"([^"]+)"', script.read_text()).group(1)
    assert info.flag == tryforms.FORMS[form]
    assert ("N:" if info.flag == "-N" else "D:") in getopts


@pytest.fixture(params=list(tryforms.FORMS))
def real_try(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test below runs once per form of try, through ``try.path``; never skips in CI."""
    script = tryforms.use(request.param, monkeypatch)
    reason = try_unavailable(str(script))   # a real call through try: once per script
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"binpash/try {request.param} must work in CI: {reason}")
        pytest.skip(f"binpash/try {request.param} unavailable here: {reason}")
    monkeypatch.setenv("WORKSPACE_ENGINE", "try")
    return script


def _sandbox(tmp_path: Path) -> Path:
    return next((tmp_path / "state").rglob("upperdir")).parent


HOSTILE = [
    "echo 'single \"double\" $HOME `not run`'",
    'echo "dollar \\$HOME backslash \\\\ quote \\" tick \\`"',
    "printf '%s|' \"it's\" 'a\"b' 'back\\slash' 'tab\\tnot'",
    "echo 'a\\cb' 'c\\nd'",
    "x=1; echo $x && echo \"$((x + 1))\" || echo never; false || echo or",
    "echo one\necho two\n\necho three",
    "cat <<'EOF'\n$HOME `id -u` \\n 'q' \"d\"\nEOF\ncat <<EOF\nsum=$((1+2))\nEOF",
    "echo `echo back` $(echo sub $(echo nested))",
    "bash -c 'echo \"inner: $0 [$1]\"; printf \"%s\\n\" \"it'\\''s\"' zero 'one two'",
    "sh -c \"echo \\\"dq \\$0\\\"\" posix",
    "set -- 'a b' c; for a in \"$@\"; do echo \"<$a>\"; done",
    "f() { echo \"fn $*\"; }; f x y; echo ${UNSET:-default} ${#HOME} > /dev/null; echo done",
]


@pytest.mark.parametrize("script", HOSTILE)
def test_hostile_quoting_runs_as_bash_would(ws, project: Path, real_try: Path, script: str):
    expected = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                              cwd=project)
    proc = ws("run", "-c", script)
    assert (proc.returncode, proc.stdout, proc.stderr) == (
        expected.returncode, expected.stdout, expected.stderr)


def test_hostile_argv_survives(ws, real_try: Path):
    args = ["a b", "it's", '"q"', "$HOME", "`x`", "*", "a\\nb", "semi;colon", "&&", "new\nline"]
    proc = ws("run", "--", "printf", "%s|", *args, check=True)
    assert proc.stdout == "|".join(args) + "|"


def test_globs_see_the_sandbox(ws, project: Path, real_try: Path):
    ws("run", "-c", "touch a.txt b.txt", check=True)
    assert ws("run", "-c", "echo *.txt", check=True).stdout == "README.txt a.txt b.txt\n"


def test_environment_has_no_try_or_wrapper_leftovers(ws, project: Path, real_try: Path):
    env = dict(os.environ, TMPDIR="/custom/tmp", WORKSPACE_ENGINE="try")
    env.pop("TRY_SHELL", None)
    proc = subprocess.run([sys.executable, "-m", "manager", "run", "-c",
                           "env; echo TMPDIR=$TMPDIR"], cwd=project, env=env,
                          capture_output=True, text=True, check=True)
    names = {line.split("=", 1)[0] for line in proc.stdout.splitlines() if "=" in line}
    assert not names & {"EXECID", "try_remove_log", "try_mount_log", "TRY_SHELL", "SANDBOX_DIR"}
    assert not [n for n in names if n.startswith("__WS")]
    assert "TMPDIR=/custom/tmp" in proc.stdout.splitlines()


TEMPROOT_FAILURES = ("invalid", "symbolic link", "Text file busy")


def _no_temproot_debris(sandbox: Path) -> list[str]:
    return [str(p) for p in (sandbox / "temproot").rglob("*") if not p.is_dir()]


def test_twenty_sequential_calls_in_one_sandbox(ws, project: Path, tmp_path: Path,
                                                real_try: Path):
    for i in range(20):
        proc = ws("run", "-c", f"echo {i} > seq-{i}.txt && cat seq-{i}.txt")
        assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"{i}\n", ""), i
    changes = {c["path"] for c in json.loads(ws("status", "--json").stdout)["changes"]}
    assert {str(project / f"seq-{i}.txt") for i in range(20)} <= changes
    assert _no_temproot_debris(_sandbox(tmp_path)) == []


def test_eight_parallel_calls_lose_nothing(ws, project: Path, tmp_path: Path, real_try: Path):
    ws("run", "--", "true", check=True)
    # The same new directories in every call: parallel copy-ups of one parent are the hard case.
    procs = [subprocess.Popen([sys.executable, "-m", "manager", "run", "-c",
                               f"mkdir -p sub/deeper && echo {i} > sub/deeper/f-{i} && echo {i}"],
                              cwd=project, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(8)]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    for i, (rc, out, err) in enumerate(results):
        assert rc == 0 and out == f"{i}\n", (i, rc, out, err)
        assert not any(word in err for word in TEMPROOT_FAILURES), err
    listed = ws("run", "-c", "cat sub/deeper/f-*", check=True).stdout.split()
    assert sorted(listed) == [str(i) for i in range(8)]
    assert _no_temproot_debris(_sandbox(tmp_path)) == []


def test_debris_of_a_killed_call_is_cleared(ws, tmp_path: Path, real_try: Path):
    ws("run", "--", "true", check=True)
    temproot = _sandbox(tmp_path) / "temproot"
    # What a call killed mid-way leaves: try's symlinks for /bin and friends, its /dev files.
    (temproot / "ws-test-link").symlink_to("usr/bin")
    (temproot / "dev").mkdir(exist_ok=True)
    (temproot / "dev/null").write_text("")
    assert ws("run", "--", "echo", "fine", check=True).stdout == "fine\n"


TRY_KINDS = {"added": "added", "created dir": "added", "modified": "modified",
             "deleted": "deleted", "replaced with dir": "replaced"}


def _try_summary(script: Path, sandbox: Path, tmp_path: Path) -> dict[str, str]:
    tmp = tmp_path / "try-tmp"
    tmp.mkdir(exist_ok=True)
    proc = subprocess.run([str(script), "summary", str(sandbox)], capture_output=True,
                          text=True, env=dict(os.environ, TMPDIR=str(tmp)))
    found = {}
    for line in proc.stdout.splitlines():
        match = re.fullmatch(r"(/.*) \((.+)\)", line)
        if match:
            found[match.group(1)] = TRY_KINDS.get(match.group(2), match.group(2))
    return found


def test_try_summary_lists_what_status_lists(ws, project: Path, tmp_path: Path,
                                             real_try: Path):
    (project / "gone.txt").write_text("bye\n")
    (project / "olddir").mkdir()
    (project / "olddir/f").write_text("x")
    script = ("echo more >> README.txt; rm gone.txt; mkdir -p new/dir; echo n > new/dir/f; "
              "rm -r olddir; mkdir olddir; echo y > olddir/g")
    ws("run", "-c", script, check=True)
    ours = {c["path"]: c["kind"]
            for c in json.loads(ws("status", "--json", check=True).stdout)["changes"]
            if c["in_project"]}
    theirs = {p: k for p, k in _try_summary(real_try, _sandbox(tmp_path), tmp_path).items()
              if Path(p) == project or project in Path(p).parents}
    assert ours[str(project / "README.txt")] == "modified"
    assert ours[str(project / "gone.txt")] == "deleted"
    assert ours[str(project / "olddir")] == "replaced"
    if try_probe.inspect(real_try).flag == "-D":
        # try v0.2.0's summary does not read opaque directories: the replaced one is missing.
        del ours[str(project / "olddir")]
    assert theirs == ours


def test_directories_try_leaves_empty_are_read_from_its_log(tmp_path: Path, monkeypatch) -> None:
    from manager.engines.try_ import probe as try_probe
    log = tmp_path / try_layout.OURS / "try.log"
    log.parent.mkdir(parents=True)
    log.write_text('try(/x/mount_and_execute.sh): Warning: Failed mounting /var as an overlay and '
                   'mergerfs or unionfs not set\nWarning: Failed mounting /run as an overlay\n'
                   'try(/x/mount_and_execute.sh): Warning: Failed mounting /mnt via mergerfs, see '
                   '"/x/mount.log"\n')
    hidden = try_probe._hidden_directories(tmp_path)
    assert hidden == ["/mnt", "/run", "/var"]
    monkeypatch.chdir(tmp_path)
    assert try_probe._visibility(hidden).ok  # tmp_path is not under /var or /run
    project = tmp_path / "var-project"
    project.mkdir()
    assert not try_probe._visibility([str(tmp_path)]).ok


def _user_config(tmp_path: Path, text: str) -> None:
    path = tmp_path / "config" / "workspace" / "config.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


# -- reported bugs, reproduced first ----------------------------------------------------------

def _as_owner_only(argv: list[str]) -> list[str]:
    """As root, drop the capabilities that ignore modes: root then meets them as an owner does."""
    if os.geteuid() != 0:
        return argv
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", "--", *argv]


def test_a_tree_its_owner_locked_is_removed(tmp_path: Path):
    """What try leaves: dirs with the modes of / and its children (0700, 0555, 0000...)."""
    root = tmp_path / "sandbox"
    for sub in ("unreadable/deeper/deepest", "readonly/sub", "plain"):
        (root / sub).mkdir(parents=True)
        (root / sub / "f").write_text("x")
    (root / "readonly/link").symlink_to("sub")
    for sub, mode in (("unreadable/deeper/deepest", 0), ("unreadable/deeper", 0o300),
                      ("unreadable", 0), ("readonly/sub", 0o555), ("readonly", 0o500)):
        (root / sub).chmod(mode)
    code = "import sys; from pathlib import Path; from manager.fs import util as fsutil; " \
           "fsutil.remove_tree(Path(sys.argv[1]))"
    proc = subprocess.run(_as_owner_only([sys.executable, "-c", code, str(root)]),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert not root.exists()


def test_remove_tree_still_reports_what_it_cannot_remove(tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        from manager.fs import util as fsutil

        fsutil.remove_tree(tmp_path / "never-made")


def _doctor_try(ws) -> tuple[int, dict[str, tuple[bool, str, str]]]:
    proc = ws("doctor", "--engine", "try", "--json")
    assert proc.returncode in (0, 1), proc.stderr  # 3 would be a crash
    checks = json.loads(proc.stdout)["engines"]["try"]
    return proc.returncode, {c["name"]: (c["ok"], c["detail"], c.get("fix", "")) for c in checks}


def test_doctor_says_try_works_after_a_real_call(ws, real_try: Path):
    _, checks = _doctor_try(ws)
    assert all(ok for ok, _, _ in checks.values()), checks
    assert checks["try installed"][1] == str(real_try)
    assert checks["trial run in a scratch sandbox"][:2] == (True, "works")


def test_doctor_trial_runs_where_sessions_live_not_in_tmpdir(ws, real_try: Path,
                                                            monkeypatch: pytest.MonkeyPatch):
    """try never overlays /dev: a sandbox there is what try sees for a top-level directory it
    could not overlay (mounts below it), e.g. a /tmp the probe used while sessions live in ~."""
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="ws-test-tmpdir-") as tmp:
        monkeypatch.setenv("TMPDIR", tmp)
        _, checks = _doctor_try(ws)
    assert checks["trial run in a scratch sandbox"][:2] == (True, "works"), checks


def test_doctor_says_why_a_sandbox_try_cannot_show_fails(ws, real_try: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="ws-test-state-") as state:
        monkeypatch.setenv("XDG_STATE_HOME", state)
        _, checks = _doctor_try(ws)
        assert not list(Path(state).rglob("upperdir")), "the scratch sandbox was left behind"
    ok, detail, fix = checks["trial run in a scratch sandbox"]
    assert not ok
    assert "/dev" in fix and "XDG_STATE_HOME" in fix, (detail, fix)


def test_doctor_names_a_try_that_fails_and_the_fix(ws, project: Path, tmp_path: Path):
    if reason := _overlay_works():  # the same namespaces wrap try
        pytest.skip(f"user namespaces unavailable: {reason}")
    script = _fake_try(tmp_path, USAGE_MAIN, run='echo "try: mount failed: broken" >&2; exit 2')
    _user_config(tmp_path, f"try:\n  path: {script}\n")   # a project file needs trust
    _, checks = _doctor_try(ws)
    ok, detail, fix = checks["trial run in a scratch sandbox"]
    assert not ok and "mount failed: broken" in detail and fix
    assert "try: not available" in ws("doctor", "--engine", "try").stdout


def test_doctor_names_a_missing_try_and_how_to_install_it(ws, project: Path, tmp_path: Path):
    _user_config(tmp_path, f"try:\n  path: {tmp_path / 'gone/try'}\n")
    _, checks = _doctor_try(ws)
    ok, detail, fix = checks["try installed"]
    assert not ok and "not found" in detail and "binpash/try" in fix


def test_a_plugin_session_is_served_through_the_real_hooks(project: Path, tmp_path: Path,
                                                          real_try: Path):
    from tests.claude.conftest import Claude

    claude = Claude(project, tmp_path)
    # This interpreter: the checkout's .venv may be one an ordinary account cannot run.
    claude.env.update(WORKSPACE_ENGINE="try", WORKSPACE_TRY__PATH=str(real_try),
                      WORKSPACE_PYTHON=sys.executable)
    started = claude.start()
    assert started.returncode == 0 and "failed" not in started.stdout, started.stdout
    answer = claude.pre_bash("echo sandboxed > hook.txt && cat hook.txt")
    assert answer.decision != "deny", answer.json
    run = claude.shell(answer.command)
    assert (run.returncode, run.stdout) == (0, "sandboxed\n"), run.stderr
    assert not (project / "hook.txt").exists()
    assert (_sandbox(tmp_path) / "upperdir" / str(project).lstrip("/") / "hook.txt").exists()


def test_what_commit_writes_is_the_users_with_the_modes_made(ws, project: Path, real_try: Path):
    ws("run", "-c", "umask 022; mkdir -p d/private d/open && chmod 700 d/private && "
       "echo x > d/f && printf '#!/bin/sh\\necho run\\n' > d/x.sh && chmod 755 d/x.sh && "
       "echo s > d/private/s && chmod 600 d/private/s && chmod 1777 d/open", check=True)
    ws("commit", check=True)
    expected = {"d": 0o755, "d/private": 0o700, "d/open": 0o1777, "d/f": 0o644,
                "d/x.sh": 0o755, "d/private/s": 0o600}
    for rel, mode in expected.items():
        st = (project / rel).lstat()
        assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid()), rel
        assert stat.S_IMODE(st.st_mode) == mode, (rel, oct(st.st_mode))
    assert subprocess.run([str(project / "d/x.sh")], capture_output=True, text=True).stdout \
        == "run\n"


def test_a_sandbox_that_cannot_be_entered_exits_125_with_the_reason(ws, real_try: Path,
                                                                   tmp_path: Path):
    ws("run", "--", "true", check=True)
    lock = _sandbox(tmp_path) / try_layout.OURS / "lock"
    lock.unlink()
    lock.mkdir()  # the entry cannot open its lock
    proc = ws("run", "--", "echo", "never")
    assert proc.returncode == 125 and "never" not in proc.stdout
    assert "workspace:" in proc.stderr, proc.stderr


def test_namespaces_refused_exit_125_with_the_reason(ws, project: Path, real_try: Path,
                                                     tmp_path: Path):
    """No user namespaces (a hardened host): unshare itself fails before try runs."""
    ws("run", "--", "true", check=True)
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "unshare").write_text("#!/bin/sh\necho 'unshare: unshare failed: "
                                  "Operation not permitted' >&2\nexit 1\n")
    (shim / "unshare").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}")
    proc = subprocess.run([sys.executable, "-m", "manager", "run", "--", "echo", "never"],
                          cwd=project, env=env, capture_output=True, text=True)
    assert proc.returncode == 125 and "never" not in proc.stdout, proc
    assert "Operation not permitted" in proc.stderr


def test_a_directory_the_sandbox_removed_is_never_replaced_by_another(
        ws, project: Path, real_try: Path):
    """The command never runs somewhere else than asked: exit 125 with the reason."""
    (project / "sub").mkdir()
    ws("run", "--", "rm", "-r", "sub", check=True)
    proc = ws("run", "--cwd", str(project / "sub"), "--", "sh", "-c", "echo ran in $(pwd)")
    assert proc.returncode == 125 and "ran in" not in proc.stdout, proc
    assert "does not exist in the sandbox" in proc.stderr
