"""podman's own storage below a directory the sandbox overlays ($HOME, by podman's default).

Rootless podman keeps its containers' files in ~/.local/share/containers/storage and mounts
each container's files there as it starts; the kernel refuses, in a user namespace, an
overlay whose lower directory has mounts below it. Before this was handled every call of a
default rootless setup failed with podman's `invalid argument`.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

import pytest

from manager.engines.container import levels as container_levels
from manager.engines.container import view as container_view
from manager.engines.container.engine import rootless_podman
from tests.engines.support import status


def _home_holding_storage(home: Path) -> tuple[str, ...]:
    """A $HOME as an ordinary user's looks: podman's storage in it, dotfiles, directories."""
    (home / ".local/share/containers/storage").mkdir(parents=True)
    (home / ".local/share/applications").mkdir()
    (home / ".local/bin").mkdir()
    (home / ".config/git").mkdir(parents=True)
    (home / ".gitconfig").write_text("[user]\n\tname = A\n")
    (home / ".big").write_bytes(b"x" * (container_levels.COPY_LIMIT + 1))
    (home / ".link").symlink_to(".gitconfig")
    (home / "odd:name").mkdir()
    os.mkfifo(home / ".fifo")
    return (str(home / ".local/share/containers/storage"), "/run/user/1/containers")


def test_home_holding_the_storage_is_shown_entry_by_entry_around_it(tmp_path: Path):
    home = Path(os.environ["HOME"])
    storage = _home_holding_storage(home)
    shown = container_levels.plan(str(home), set(), container_levels.hidden_roots(storage))
    h = str(home)
    assert shown.levels == [h, f"{h}/.local", f"{h}/.local/share"]
    assert shown.whole == [f"{h}/.config", f"{h}/.local/bin", f"{h}/.local/share/applications"]
    assert shown.readonly == [f"{h}/.big"]
    assert [p for p, _ in shown.hidden] == [f"{h}/.fifo", f"{h}/.local/share/containers",
                                            f"{h}/odd:name"]
    # Parents are mounted before what is mounted on them.
    assert [p for p, _ in shown.mounts()][:3] == [h, f"{h}/.config", f"{h}/.local"]
    sandbox = tmp_path / "sandbox"
    container_levels.build(sandbox, shown)
    skeleton = container_levels.skeleton_dir(sandbox, h)
    assert sorted(os.listdir(skeleton)) == [".big", ".config", ".gitconfig", ".link", ".local"]
    assert (skeleton / ".gitconfig").read_text() == "[user]\n\tname = A\n"
    assert os.readlink(skeleton / ".link") == ".gitconfig"
    assert (skeleton / ".big").stat().st_size == 0          # a mount point for its bind
    assert sorted(os.listdir(skeleton / ".local/share")) == ["applications"]
    assert os.listdir(skeleton / ".config") == []           # a mount point for its overlay
    # podman gives an overlay's upper root its lower's mode: a level's skeleton has its own.
    (home / ".local").chmod(0o700)
    container_levels.build(sandbox, shown)
    assert (skeleton / ".local").stat().st_mode & 0o7777 == 0o700


def test_podmans_storage_and_mounts_decide_what_rootless_podman_overlays(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    home = Path(os.environ["HOME"])   # in /tmp (the test's tmp dir)
    project = home.parent / "proj"
    project.mkdir(exist_ok=True)
    storage = _home_holding_storage(home)
    # $HOME holds the storage: kept (shown entry by entry); /tmp holds it too: left out, and
    # $HOME, no longer inside an overlaid /tmp, stands on its own.
    assert container_view.wanted(str(project), True, storage, set()) == [str(home)]
    assert "/tmp is not overlaid in this container: podman's storage " in capsys.readouterr().err
    # The run root in /tmp (XDG_RUNTIME_DIR unset, no /run/user/UID): the note says that fix.
    runroot = ("/var/lib/x/storage", "/tmp/containers-user-1/containers")
    assert container_view.wanted(str(project), True, runroot, set()) == [str(home)]
    err = capsys.readouterr().err
    assert "/tmp is not overlaid in this container: podman's run root /tmp/containers-user-1/" \
           "containers is below it" in err
    assert "set XDG_RUNTIME_DIR=/run/user/$(id -u)" in err
    # Nothing below /tmp and no storage there: /tmp is overlaid whole, $HOME with it.
    assert container_view.wanted(str(project), True, ("/var/lib/x/storage",), set()) == ["/tmp"]
    # Elsewhere than in a user namespace (docker, rootful podman) both are overlaid whole.
    assert container_view.wanted(str(project), False, storage) == ["/tmp"]
    limits = container_view.rootless_limits(storage, set())
    assert limits[0].startswith("/tmp is not overlaid (the image's): podman's storage")
    assert limits[1] == f"{home} is overlaid entry by entry (podman's storage is in it)"
    assert any(line.startswith(f"{home}/.local/share/containers is not shown: podman's storage")
               for line in limits), limits


@pytest.mark.engine
@pytest.mark.parametrize("engine_name", ["podman"], indirect=True)
def test_calls_work_with_podmans_storage_in_home(ws, project: Path, engine_name: str,
                                                  monkeypatch: pytest.MonkeyPatch):
    """$HOME is a real directory holding the storage podman uses (only read: writes land in
    the session's upper directory)."""
    home = _graph_root().parents[1]   # ~/.local/share by default: above containers/storage
    monkeypatch.setenv("HOME", str(home))
    proc = ws("run", "--", "sh", "-c", "echo hi > made.txt && test -d ~ && cat made.txt")
    assert (proc.returncode, proc.stdout) == (0, "hi\n"), proc.stderr
    assert status(ws) == {str(project / "made.txt"): "added"}
    # Rootless, entry by entry, with a note: podman's storage is not shown.
    noted = f"workspace: {home}/containers is not shown in this container: podman's storage"
    assert (noted in proc.stderr) == rootless_podman(), proc.stderr


@pytest.mark.engine
@pytest.mark.parametrize("engine_name", ["podman"], indirect=True)
def test_a_project_holding_podmans_storage_is_refused_plainly(ws, engine_name: str):
    """A session started in $HOME (its project then holds podman's storage): under rootless
    podman, an error that says why and what to do, not podman's `invalid argument`."""
    holder = _graph_root().parents[1]
    proc = ws("run", "--", "true", cwd=holder)
    if rootless_podman():
        assert proc.returncode == 125, proc.stderr   # the sandbox failed: the command did not run
        assert f"{holder} holds podman's own storage" in proc.stderr
        assert "hint: start the session in a project directory below it" in proc.stderr
        assert "invalid argument" not in proc.stderr
    else:
        assert proc.returncode == 0, proc.stderr   # rootful podman mounts it as root: no limit
    ws("discard", "--yes", cwd=holder)


def _within(path: str, root: Path) -> bool:
    return path == str(root) or path.startswith(f"{root}/")


def _graph_root() -> Path:
    return Path(subprocess.run(["podman", "info", "--format", "{{.Store.GraphRoot}}"],
                               capture_output=True, text=True, check=True).stdout.strip())


@pytest.mark.engine
@pytest.mark.parametrize("engine_name", ["podman-volume", "docker-volume"], indirect=True)
def test_home_is_the_callers_when_the_project_is_in_it_and_it_is_not_overlaid(
        ws, engine_name: str, monkeypatch: pytest.MonkeyPatch):
    """Volume mode (and rootless podman's default) leaves $HOME to the container: with the
    project below it, the runtime made it as root's, and tools could not write their caches
    (pip, npm: `Permission denied`)."""
    project = Path(os.environ["HOME"]) / "proj"
    project.mkdir()
    proc = ws("run", "--", "sh", "-c", "echo kept > ~/.tool-cache && cat ~/.tool-cache && "
              "stat -c %u ~", cwd=project)
    assert (proc.returncode, proc.stdout) == (0, f"kept\n{os.getuid()}\n"), proc.stderr


# -- podman's storage where it is by default, in the test's own $HOME -----------------------

Storage = Callable[[Path, Path], None]


@pytest.fixture
def own_storage(engine_name: str, tmp_path: Path,
                monkeypatch: pytest.MonkeyPatch) -> Iterator[Storage]:
    """Point podman at a fresh graph root and run root (``use(graph, run)``), reading the image
    from the usual store (``additionalimagestores``): the test's own storage, wherever it
    must be, without touching the real one. Its containers and files go with the test."""
    real = _graph_root()
    # Rootless podman takes a graph root only from the user's own file (a system file's is
    # ignored): it is the test's, in its XDG_CONFIG_HOME.
    conf = Path(os.environ["XDG_CONFIG_HOME"]) / "containers/storage.conf" \
        if rootless_podman() else tmp_path / "storage.conf"
    roots: list[Path] = []

    def use(graph: Path, run: Path) -> None:
        conf.parent.mkdir(parents=True, exist_ok=True)
        conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{graph}"\n'
                        f'runroot = "{run}"\n[storage.options]\n'
                        f'additionalimagestores = ["{real}"]\n')
        if not rootless_podman():
            monkeypatch.setenv("CONTAINERS_STORAGE_CONF", str(conf))
        roots.extend([graph, run])

    yield use
    if roots:
        state = Path(os.environ["XDG_STATE_HOME"]) / "workspace"
        ids = subprocess.run(["podman", "ps", "-aq", "--filter", f"label=org.workspace.state={state}"],
                             capture_output=True, text=True).stdout.split()
        if ids:
            subprocess.run(["podman", "rm", "-f", "-v", *ids], capture_output=True)
        # Back to the usual storage (podman would make these roots again), then its files,
        # which belong to subordinate ids too (rootless): removed as podman's root, its
        # driver's own mount (in the pause namespace, rootless) first.
        conf.unlink()
        monkeypatch.delenv("CONTAINERS_STORAGE_CONF", raising=False)
        clean = 'umount -l "$1/overlay" 2>/dev/null; rm -rf "$@"'
        prefix = ["podman", "unshare"] if rootless_podman() else []
        subprocess.run([*prefix, "sh", "-c", clean, "sh", *map(str, roots)], capture_output=True)
        assert not any(r.exists() for r in roots), "the test's podman storage is left over"


def _storage_in_home(own_storage: Storage, tmp_path: Path) -> Path:
    home = Path(os.environ["HOME"])
    own_storage(home / ".local/share/containers/storage", tmp_path / "run")
    env = dict(os.environ, HOME=str(home))
    for key, value in (("user.name", "Dot Files"), ("user.email", "dot@example.com")):
        subprocess.run(["git", "config", "--global", key, value], env=env, check=True)
    (home / ".bashrc").write_text("export A=1\n")
    (home / ".config/foo").mkdir(parents=True)
    return home


@pytest.mark.engine
@pytest.mark.parametrize("engine_name", ["podman"], indirect=True)
def test_dotfiles_are_the_users_and_their_changes_are_held_with_the_storage_in_home(
        ws, project: Path, tmp_path: Path, own_storage: Storage, engine_name: str):
    """The issue: rootless podman left $HOME to the image, so ~/.gitconfig was missing
    (`git commit`: "Please tell me who you are") and dotfile changes were not reviewed."""
    home = _storage_in_home(own_storage, tmp_path)
    proc = ws("run", "-c", "git init -q && git add README.txt && git commit -qm first && "
                           "git log -1 --format=%an && echo x >> ~/.bashrc && "
                           "echo new > ~/.config/foo/new && ls -A ~/.local/share")
    assert proc.returncode == 0, proc.stderr
    author, *listing = proc.stdout.splitlines()
    assert author == "Dot Files"
    # Rootless: podman's storage is not shown (it cannot be overlaid); rootful: as it is.
    assert ("containers" in listing) == (not rootless_podman()), listing
    changes = {p: k for p, k in status(ws).items() if not _within(p, project)}
    assert changes == {str(home / ".bashrc"): "modified",
                       str(home / ".config/foo/new"): "added"}   # no storage, no scaffolding
    ws("commit", check=True)
    assert (home / ".bashrc").read_text() == "export A=1\nx\n"
    assert (home / ".config/foo/new").read_text() == "new\n"
    assert status(ws) == {}
    # doctor says what is left out, and why: not a plain "works".
    doctor = ws("doctor", "--engine", "podman", timeout=300).stdout
    # (The headline says "with limits" on every container engine since doctor's network line
    # warns that they keep no egress record; the view's own line says what is left out.)
    assert ("warn $HOME and /tmp overlaid" in doctor) == rootless_podman(), doctor
    assert (f"{home}/.local/share/containers is not shown: podman's storage" in doctor) == \
        rootless_podman(), doctor


@pytest.mark.engine
@pytest.mark.parametrize("engine_name", ["podman"], indirect=True)
def test_a_project_in_home_is_mounted_over_its_entry(ws, tmp_path: Path, own_storage: Storage,
                                                     engine_name: str):
    """The project an entry of $HOME shown entry by entry: only its own overlay is mounted
    there (podman refuses two mounts at one path), and both layers hold their changes."""
    home = _storage_in_home(own_storage, tmp_path)
    project = home / "proj"
    project.mkdir()
    (project / "README.txt").write_text("hello\n")
    proc = ws("run", "-c", "cat README.txt && echo new > new.txt && echo y >> ~/.bashrc",
              cwd=project)
    assert (proc.returncode, proc.stdout) == (0, "hello\n"), proc.stderr
    changes = status(ws, "--project", str(project))
    assert changes == {str(project / "new.txt"): "added", str(home / ".bashrc"): "modified"}
    ws("discard", "--yes", cwd=project)


@pytest.mark.engine
@pytest.mark.parametrize("engine_name", ["podman"], indirect=True)
def test_a_dotfile_changed_outside_meanwhile_is_never_silently_overwritten(
        ws, project: Path, tmp_path: Path, own_storage: Storage, engine_name: str):
    """Rootless, a dotfile is shown from a copy made when the container started: a host edit
    after that, then the sandbox's, is a conflict at commit (the sandbox worked on the copy)."""
    home = _storage_in_home(own_storage, tmp_path)
    ws("run", "--", "true", check=True)      # the container starts: its copy of $HOME's files
    with open(home / ".bashrc", "a") as f:
        f.write("# host\n")
    ws("run", "-c", "echo '# sandbox' >> ~/.bashrc", check=True)
    proc = ws("commit", str(home / ".bashrc"))
    if rootless_podman():
        assert f"conflict: {home}/.bashrc: changed outside the sandbox" in proc.stdout + \
            proc.stderr, proc.stdout + proc.stderr
        assert (home / ".bashrc").read_text() == "export A=1\n# host\n"
    else:   # overlaid whole: the sandbox saw the host's edit and kept it
        assert proc.returncode == 0, proc.stderr
        assert (home / ".bashrc").read_text() == "export A=1\n# host\n# sandbox\n"


@pytest.mark.engine
@pytest.mark.parametrize("engine_name", ["podman"], indirect=True)
def test_a_run_root_in_tmp_is_reported_with_the_right_fix(
        ws, project: Path, tmp_path: Path, own_storage: Storage, engine_name: str):
    """Without XDG_RUNTIME_DIR (su, runuser, cron) and /run/user/UID, podman's run root is
    in /tmp: /tmp cannot be overlaid rootless. The note and doctor say so and the real fix;
    $HOME is still overlaid."""
    own_storage(tmp_path / "graph", tmp_path / "run")
    home = Path(os.environ["HOME"])
    proc = ws("run", "-c", "echo x >> ~/.profile")
    assert proc.returncode == 0, proc.stderr
    noted = f"/tmp is not overlaid in this container: podman's run root {tmp_path}/run is below"
    assert (noted in proc.stderr) == rootless_podman(), proc.stderr
    assert ("XDG_RUNTIME_DIR=/run/user/$(id -u)" in proc.stderr) == rootless_podman()
    assert status(ws).get(str(home / ".profile")) == "added"
    doctor = ws("doctor", "--engine", "podman", "--json", timeout=300)
    found = json.loads(doctor.stdout)["engines"]["podman"]
    view = next((c for c in found if c["name"] == "$HOME and /tmp overlaid"), None)
    assert view is not None, found
    assert (view["ok"], view["warn"]) == (True, rootless_podman()), view
    if rootless_podman():
        assert f"/tmp is not overlaid (the image's): podman's run root {tmp_path}/run" \
            in view["detail"] and "XDG_RUNTIME_DIR" in view["detail"], view
        text = ws("doctor", "--engine", "podman", timeout=300).stdout
        assert "podman: works, with limits" in text and "warn $HOME and /tmp overlaid" in text
