"""Every test runs against temporary state: no real ~/.claude, no real $XDG_STATE_HOME.

The autouse fixture points HOME and the XDG directories into the test's tmp
dir and sets WORKSPACE_FORBID_DEFAULT_STATE, so code that forgets to honour
them raises instead of writing into the real home directory; after the test it
checks that nothing the test could have made changed in the real state
directories (other processes on the machine may change them meanwhile).

Also here: the ``as_user`` marker (what scripts/test.sh runs a second time as
an ordinary user), ``--alone`` (which runs select the tests marked ``alone``), ``--part``
(one of N runs side by side, a file each in turn), and, in CI, every skip reported as a failure.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.holders import release_podman_mounts
from tests.holders import stop_holders
from tests.overlay_model import Tree

# A run started in the background by a non-interactive shell (`cmd &`) inherits SIGINT
# ignored, and so would every process the tests start: the tests that interrupt a call
# (Ctrl-C) need it delivered. A handler here gives children the default on exec.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

REAL_HOME = Path(os.path.expanduser("~"))
REAL_STATE = Path(os.environ.get("XDG_STATE_HOME") or REAL_HOME / ".local/state") / "workspace"
REAL_CLAUDE = REAL_HOME / ".claude"


TESTS = Path(__file__).resolve().parent
# Run again as an ordinary user: the engine behaviour suite, the real-client plugin e2e ...
AS_USER_DIRS = (TESTS / "engines", TESTS / "e2e")
# ... and every test that drives the real CLI (ws), hook launcher (claude) or overlay engine.
AS_USER_FIXTURES = {"ws", "claude", "overlay_engine"}
# Tests that ask for an engine by fixture are engine tests (the fast tier,
# -m "not engine and not e2e", leaves them out) wherever they live.
ENGINE_FIXTURES = {"overlay_engine", "engine_name", "commit_engine"}
LISTING_LIMIT = 5000          # entries per real directory; ~/.claude can be large
CONTENT_LIMIT = 1 << 20       # bytes read from a changed file to see whose it is


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--alone", choices=("with", "without", "only"), default="with",
        help="the tests marked alone (they change the host for every other test): run them "
             "with the rest, leave them out, or run only them (scripts/test.sh runs the root "
             "and the ordinary user's passes side by side, then these by themselves)")
    parser.addoption(
        "--part", default="1/1", metavar="K/N",
        help="run only the K-th of N parts: the test files in collection order, dealt in turn "
             "(scripts/test.sh runs each pass as parts side by side: the tests mostly wait on "
             "engines)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _select_alone(config, items)
    _select_part(config, items)
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if fixtures & ENGINE_FIXTURES:     # drives a real engine: not in the fast tier
            item.add_marker(pytest.mark.engine)
        if item.get_closest_marker("needs_root"):
            continue
        path = Path(str(item.path)).resolve()
        if fixtures & AS_USER_FIXTURES or any(d in path.parents for d in AS_USER_DIRS):
            item.add_marker(pytest.mark.as_user)


def _select_alone(config: pytest.Config, items: list[pytest.Item]) -> None:
    choice = config.getoption("--alone")
    if choice == "with":
        return
    only = choice == "only"
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        (kept if bool(item.get_closest_marker("alone")) == only else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _select_part(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files dealt to part K of N in turn, in collection order: every part sees the same
    order, so the parts together run each test once."""
    match = re.fullmatch(r"([1-9][0-9]*)/([1-9][0-9]*)", config.getoption("--part"))
    if not match or int(match[1]) > int(match[2]):
        raise pytest.UsageError("--part takes K/N with 1 <= K <= N, e.g. 1/2")
    part, parts = int(match[1]) - 1, int(match[2])
    if parts == 1:
        return
    files: dict[str, int] = {}
    for item in items:
        files.setdefault(str(item.path), len(files))
    kept = [item for item in items if files[str(item.path)] % parts == part]
    dropped = [item for item in items if files[str(item.path)] % parts != part]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    """In CI nothing skips: a missing engine or tool is a failure there, with the skip's reason."""
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") and report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped in CI (CI={os.environ['CI']}), which must not skip: {reason}"


def _listing(root: Path) -> dict[str, tuple[int, int]]:
    """path -> (mtime, size) of root and what is below it, at most LISTING_LIMIT entries."""
    found: dict[str, tuple[int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in [".", *dirnames, *filenames]:
            path = os.path.normpath(os.path.join(dirpath, name))
            with contextlib.suppress(OSError):
                st = os.lstat(path)
                found[path] = (st.st_mtime_ns, st.st_size)
            if len(found) >= LISTING_LIMIT:
                return found
    return found


def snapshot(roots: tuple[Path, ...] = (REAL_STATE, REAL_CLAUDE)) -> dict[str, tuple[int, int]]:
    return {path: stat for root in roots for path, stat in _listing(root).items()}


def _made_by(tmp_path: Path, path: str) -> bool:
    """Whether a changed entry is this test's: its name or content mentions the test's tmp dir.

    Everything a test works on (projects, sessions, Claude's per-project files) lives under its
    tmp dir, so what it leaks into real state says so; what another process changes does not.
    """
    marks = {str(tmp_path), re.sub(r"[^A-Za-z0-9]", "-", str(tmp_path))}
    if any(mark in path for mark in marks):
        return True
    with contextlib.suppress(OSError):
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as f:
                head = f.read(CONTENT_LIMIT)
            return any(mark.encode() in head for mark in marks)
    return False


def leaked(tmp_path: Path, before: dict[str, tuple[int, int]],
           roots: tuple[Path, ...] = (REAL_STATE, REAL_CLAUDE)) -> list[str]:
    """Entries below roots that changed since `before` and are the test's (see _made_by)."""
    after = snapshot(roots)
    changed = {p for p in before.keys() | after.keys() if before.get(p) != after.get(p)}
    return sorted(p for p in changed if _made_by(tmp_path, p))


@pytest.fixture(autouse=True)
def _podman_mounts_released():
    """Whatever a test left in the test user's rootless podman pause namespace goes with it
    (see tests.holders.leftover_podman_mounts)."""
    yield
    import pwd

    user = os.environ.get("WORKSPACE_TEST_USER", "wstest") if os.geteuid() == 0 else None
    try:
        entry = pwd.getpwnam(user) if user else pwd.getpwuid(os.geteuid())
    except KeyError:
        return
    release_podman_mounts(entry.pw_name, entry.pw_uid)


@pytest.fixture(autouse=True)
def isolated_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    before = snapshot()
    home = tmp_path / "home"
    home.mkdir()
    for name in list(os.environ):
        if name.startswith(("WORKSPACE_", "CLAUDE_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.setenv("WORKSPACE_FORBID_DEFAULT_STATE", "1")
    # The resident hook service (manager/service) outlives the hook that starts it: only the
    # tests that ask for it (tests/service) start one, and stop it at their end.
    monkeypatch.setenv("WORKSPACE_SERVICE", "0")
    monkeypatch.setenv("NO_COLOR", "1")
    yield home
    stop_holders(tmp_path)
    _removable_work_dirs(tmp_path)
    mine = leaked(tmp_path, before)
    assert not mine, f"the test wrote into the real ~/.local/state/workspace or ~/.claude: {mine}"


def _removable_work_dirs(tmp_path: Path) -> None:
    """overlayfs leaves its work dirs mode 0000: an ordinary user's pytest could not remove
    old tmp dirs holding them."""
    for state in ("state", "account/state"):
        for work in tmp_path.glob(f"{state}/workspace/sessions/*/sandbox/workdir/*/work"):
            with contextlib.suppress(OSError):
                work.chmod(0o700)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / "README.txt").write_text("hello\n")
    return root


Runner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def ws(project: Path) -> Runner:
    """Run the real ``workspace`` CLI (a fresh interpreter) in the project."""

    def run(*args: str, cwd: Path | None = None, input: str | None = None,
            check: bool = False, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([sys.executable, "-m", "manager", *args], cwd=cwd or project,
                              input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"workspace {' '.join(args)} exited {proc.returncode}:\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    return run


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(project: Path) -> Path:
    """**The** project as a git repository: one commit of a few files and an ignore file."""
    git(project, "init", "-q", "-b", "main")
    git(project, "config", "user.email", "user@example.com")
    git(project, "config", "user.name", "User")
    (project / ".gitignore").write_text(".venv/\nbuild/\n")
    (project / "a.py").write_text("one\ntwo\nthree\n")
    (project / "b.py").write_text("x = 1\n")
    (project / "a.txt").write_text("a\n")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "initial")
    return project


@pytest.fixture
def sandboxed(ws: Runner) -> Runner:
    """``workspace run -- sh -c SCRIPT``, checked."""

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return ws("run", "--", "sh", "-c", script, check=True)

    return run


@pytest.fixture
def overlay_engine(monkeypatch: pytest.MonkeyPatch) -> str:
    """**The** fixture for the built-in overlay engine: the test's sessions use it (a failure
    in CI where it cannot run, a skip elsewhere); their holders stop with the test
    (``isolated_state``). A suite that runs all on it asks for it from an autouse fixture."""
    from tests.engines.conftest import _use

    return _use("overlay", monkeypatch)


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    """A real directory with an upper layer built by hand (see overlay_model)."""
    return Tree.make(tmp_path / "t")
