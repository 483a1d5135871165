"""What ``workspace doctor`` checks for the podman and docker engines, each with its fix.

Driven through the engine's CLI (not python-on-whales): these run on every
``auto`` engine choice, where a 200 ms import would be paid for nothing.
"""

from __future__ import annotations

import contextlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from manager.config import Config
from manager.engines.base import NETWORK_CHECK
from manager.engines.base import NETWORK_LIST_FIX
from manager.engines.base import Check
from manager.engines.container.base import EngineShape
from manager.engines.container.base import lower_volume_name
from manager.engines.container.base import resource_name
from manager.engines.container.cli import ContainerClient
from manager.session import paths

TIMEOUT = 60.0
INSTALL_FIX = {
    "docker": "install Docker (Debian: `apt-get install docker.io`, "
              "or scripts/setup.d/30-containers.sh)",
    "podman": "install podman (Debian: `apt-get install podman runc`, "
              "or scripts/setup.d/30-containers.sh)",
}
DAEMON_FIX = {
    "docker": "start the daemon (`systemctl start docker`, or `dockerd &` as root) and make sure "
              "you may use its socket (the `docker` group)",
    "podman": "see `podman info`; on hosts without systemd set runtime=runc and "
              "cgroup_manager=cgroupfs in /etc/containers/containers.conf",
}
NOT_CHECKED = "not checked: an earlier check failed"
WHALES_FIX = ("it is a dependency of workspace: reinstall workspace (`pip install "
              "workspace-sandbox`, pipx, or let the plugin's bootstrap run again)")
CALL_FIX = ("the engine cannot start a session's container or run a call in it: see the error; "
            "custom images must be built FROM workspace-sandbox")
# What the probe call does in its throwaway project: a write, a delete, and who it ran as.
PROBE_SCRIPT = "echo new > new.txt && rm old.txt && id -u"


def whales_installed() -> bool:
    """The engines start and remove containers through python-on-whales (imported later)."""
    import importlib.util

    return importlib.util.find_spec("python_on_whales") is not None


def _call(argv: list[str], timeout: float = TIMEOUT) -> tuple[int, str]:
    """``argv`` (the CLI first) through the engine's client: see ContainerClient.answer."""
    return ContainerClient(argv[0]).answer(argv[1:], timeout)


def image_missing(text: str) -> bool:
    lowered = text.lower()
    return any(s in lowered for s in ("no such image", "image not known", "failed to find image"))


def build_fix(cli: str) -> str:
    return f"build it: `workspace image build --engine {cli}` (no registry needed)"


def quick_reason(cli: str, image: str) -> str | None:
    """The cheap part of :func:`checks`, for choosing an engine: one client call."""
    if shutil.which(cli) is None:
        return f"{cli} not found (fix: {INSTALL_FIX[cli]})"
    if not whales_installed():
        return f"python-on-whales is not installed (fix: {WHALES_FIX})"
    rc, text = _call([cli, "image", "inspect", "--format", "{{.Id}}", image], timeout=15)
    if rc == 0:
        return None
    if image_missing(text):
        return f"the sandbox image {image} is missing (fix: {build_fix(cli)})"
    return f"{cli} does not answer: {text} (fix: {DAEMON_FIX[cli]})"


def checks(engine: EngineShape) -> list[Check]:
    cli, image = engine.cli, engine.config["container.image"]
    found = shutil.which(cli)
    result = [Check("engine found", found is not None, found or f"{cli} not on PATH",
                    INSTALL_FIX[cli])]
    steps = (_whales, _daemon, _location, _image, _overlay, _sandboxed_call)
    for step in steps:
        if not all(c.ok for c in result):
            result.append(Check(step.__doc__ or step.__name__, False, NOT_CHECKED,
                                "fix the failed check above first"))
            continue
        result.append(step(engine, cli, image))
    if all(c.ok for c in result[:3]):   # what the engine leaves out: a fact of its storage,
        result.append(_view(engine, cli, image))   # shown even when a later check failed
    return result


def _whales(engine: EngineShape, cli: str, image: str) -> Check:
    """python-on-whales installed"""
    ok = whales_installed()
    return Check("python-on-whales installed", ok, "" if ok else "python_on_whales not found "
                 f"by {sys.executable}", WHALES_FIX)


def daemon_version(cli: str) -> tuple[bool, str]:
    """(reachable, its version or why not): the engine answers this user."""
    if shutil.which(cli) is None:
        return False, f"{cli} not found (fix: {INSTALL_FIX[cli]})"
    argv = ([cli, "version", "--format", "{{.Server.Version}}"] if cli == "docker"
            else [cli, "info", "--format", "{{.Version.Version}}"])
    rc, text = _call(argv, timeout=15)
    return rc == 0, text


def _daemon(engine: EngineShape, cli: str, image: str) -> Check:
    """daemon reachable"""
    ok, text = daemon_version(cli)
    return Check("daemon reachable", ok, f"version {text}" if ok else text, DAEMON_FIX[cli])


def _location(engine: EngineShape, cli: str, image: str) -> Check:
    """engine location"""
    from manager.engines.container import remote as container_remote

    return container_remote.check(cli, engine.config)


def _image(engine: EngineShape, cli: str, image: str) -> Check:
    """image present"""
    rc, text = _call([cli, "image", "inspect", "--format", "{{.Id}}", image])
    detail = f"{image} ({text.removeprefix('sha256:')[:12]})" if rc == 0 else f"{image}: {text}"
    return Check("image present", rc == 0, detail, build_fix(cli))


def _overlay(engine: EngineShape, cli: str, image: str) -> Check:
    """overlay mounts work"""
    if _remote(cli):   # volume mode: the engine mounts its own overlay (the call below shows it)
        return Check("overlay mounts work", True, "not used: a remote engine mounts its own")
    root = Path(tempfile.mkdtemp(prefix="workspace-probe-"))
    try:
        return _overlay_in(engine, cli, image, root)
    finally:
        _remove_overlay_probe(engine, root)


def _remove_overlay_probe(engine: EngineShape, root: Path) -> None:
    from manager.errors import WorkspaceError

    with contextlib.suppress(WorkspaceError):
        engine.clear_work_dir(root / "work")
    shutil.rmtree(root, ignore_errors=True)


def _overlay_in(engine: EngineShape, cli: str, image: str, root: Path) -> Check:
    lower, upper, work, calls = (root / n for n in ("lower", "upper", "work", "calls"))
    for d in (lower, upper, work, calls):
        d.mkdir()
    (lower / "old.txt").write_text("old\n")
    argv = [cli, "run", "--rm", "--pull", "never", "--network", "none",
            *_mount_argv(engine, str(lower), str(upper), str(work), str(calls)), image,
            "sh", "-c", f"echo new > {lower}/new.txt && rm {lower}/old.txt"]
    rc, text = _call(argv)
    fix = ("overlayfs with a persistent upper dir must work for the engine: "
           "see docs/containers.md (kernel overlay support, rootful engine)")
    if rc != 0:
        return Check("overlay mounts work", False, text, fix)
    ok = (upper / "new.txt").is_file() and (lower / "old.txt").is_file() \
        and (upper / "old.txt").exists() and not (lower / "new.txt").exists()
    return Check("overlay mounts work", ok, "" if ok else "writes did not land in the upper dir",
                 fix)


def _sandboxed_call(engine: EngineShape, cli: str, image: str) -> Check:
    """a sandboxed call works"""
    root = Path(tempfile.mkdtemp(prefix="workspace-probe-"))
    try:
        return _call_in(engine, image, root)
    finally:
        _remove_probe(engine, root)


def _call_in(engine: EngineShape, image: str, root: Path) -> Check:
    """``workspace run`` in a throwaway project and state dir: the path every call takes.

    It starts the session's container (python-on-whales) and runs the call through the entry
    script; the write must land in the upper dir as the caller's, the project untouched.
    """
    project = root / "proj"
    project.mkdir()
    (project / "old.txt").write_text("old\n")
    env = dict(os.environ, XDG_STATE_HOME=str(root / "state"), WORKSPACE_ENGINE=engine.name,
               WORKSPACE_CONTAINER__IMAGE=image)
    name = "a sandboxed call works"
    try:
        proc = subprocess.run([sys.executable, "-m", "manager", "run", "-c", PROBE_SCRIPT],
                              cwd=project, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT * 3, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return Check(name, False, f"no answer within {TIMEOUT * 3:.0f} s", CALL_FIX)
    if proc.returncode != 0:
        text = proc.stderr.strip().splitlines()
        detail = f"exit {proc.returncode}: " + (" ".join(text[-3:]) if text else "no output")
        return Check(name, False, detail, WHALES_FIX if "python-on-whales" in detail
                     else CALL_FIX)
    if _remote(engine.cli):   # the changes are in the engine: status exports them here
        subprocess.run([sys.executable, "-m", "manager", "status"], cwd=project, env=env,
                       capture_output=True, timeout=TIMEOUT, stdin=subprocess.DEVNULL)
    uppers = list((root / "state").glob("workspace/sessions/*/sandbox/upper"))
    new = uppers[0] / "new.txt" if uppers else None
    problems = [what for what, bad in (
        (f"ran as uid {proc.stdout.strip()}, not {os.getuid()}",
         proc.stdout.strip() != str(os.getuid())),
        ("the write did not land in the upper dir", new is None or not new.is_file()),
        ("the write is not the caller's", new is not None and new.is_file()
         and new.stat().st_uid != os.getuid()),
        ("the project itself changed", (project / "new.txt").exists()
         or not (project / "old.txt").exists())) if bad]
    return Check(name, not problems, "; ".join(problems), CALL_FIX)


VIEW_CHECK = "$HOME and /tmp overlaid"
VIEW_FIX = ("podman's storage below $HOME: graphroot (or rootless_storage_path) in "
            "~/.config/containers/storage.conf outside $HOME overlays $HOME whole; for /tmp, "
            "the fix named above (docs/containers.md)")


def _view(engine: EngineShape, cli: str, image: str) -> Check:
    """$HOME and /tmp overlaid"""
    from manager.engines.container import view as container_view
    from manager.engines.container.engine import rootless_podman

    if cli != "podman" or not rootless_podman():
        return Check(VIEW_CHECK, True, "both, each as a whole (host mode)")
    out = ContainerClient(cli).output(["info", "--format", "{{.Store.GraphRoot}}\n{{.Store.RunRoot}}"])
    storage = tuple(os.path.realpath(line) for line in out.splitlines() if line.startswith("/"))
    limits = container_view.rootless_limits(storage, container_view.rootless_points())
    if not limits:
        return Check(VIEW_CHECK, True, "both, each as a whole")
    return Check(VIEW_CHECK, True, "; ".join(limits), VIEW_FIX, warn=True)


def _remove_probe(engine: EngineShape, root: Path) -> None:
    """The probe's container (labelled with its state dir) and work dirs, then the dir."""
    from manager.engines.container.view import WORKS
    from manager.errors import WorkspaceError

    state = root / "state" / "workspace"
    ids = ContainerClient(engine.cli).output(["ps", "-aq", "--filter",
                                              f"label=org.workspace.state={state}"], timeout=30).split()
    if ids:
        _call([engine.cli, "rm", "-f", "-v", *ids])
    for session in state.glob("sessions/*"):
        _call([engine.cli, "volume", "rm", resource_name(session.name, str(state)),
               lower_volume_name(session.name, str(state))], timeout=30)   # a remote one's copy
        sandbox = session / "sandbox"   # the project's work dir, and $HOME's and /tmp's
        for work in [sandbox / "work", *sorted(sandbox.glob(f"{WORKS}/*"))]:
            with contextlib.suppress(WorkspaceError):
                engine.clear_work_dir(work)
    shutil.rmtree(root, ignore_errors=True)


def _mount_argv(engine: EngineShape, lower: str, upper: str, work: str,
                calls: str) -> list[str]:
    """The CLI flags for the engine's mount options (the probe does not use python-on-whales)."""
    options = engine.mount_options(lower, upper, work, calls)
    argv: list[str] = []
    for mount in options.get("mounts", []):
        argv += ["--mount", ",".join(mount)]
    for volume in options.get("volumes", []):
        argv += ["-v", ":".join(volume)]
    userns = engine.identity().get("userns")
    return argv + ([f"--userns={userns}"] if userns else [])


# -- container.upper: auto ------------------------------------------------------


def host_overlay_works(engine: EngineShape) -> bool:
    """Whether the engine is local Linux and mounts overlays over host dirs (cached per kernel).

    ``auto`` asks this when it creates a container: the probe runs a container
    (~0.3 s), so its answer is kept in the state directory.
    """
    if sys.platform != "linux" or _remote(engine.cli):
        return False
    cache = paths.state_home() / f"probe-{engine.cli}-overlay-{platform.release()}"
    if cache.exists():
        return True
    root = Path(tempfile.mkdtemp(prefix="workspace-probe-"))
    try:
        ok = _overlay_in(engine, engine.cli, engine.config["container.image"], root).ok
    finally:
        _remove_overlay_probe(engine, root)
    if ok:   # a failure may be passing (daemon restarting): ask again next time
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("ok\n")
    return ok


def _remote(cli: str) -> bool:
    """The engine runs elsewhere (a VM, another machine): host paths are not its paths."""
    host = os.environ.get("DOCKER_HOST" if cli == "docker" else "CONTAINER_HOST", "")
    if host and not host.startswith("unix://"):
        return True
    from manager.engines.container import remote as container_remote

    if container_remote.location(cli, Config()).remote:   # the engines' own variables
        return True
    argv = ([cli, "info", "--format", "{{.OperatingSystem}}"] if cli == "docker"
            else [cli, "info", "--format", "{{.Host.ServiceIsRemote}}"])
    rc, text = _call(argv, timeout=15)
    return rc == 0 and ("Docker Desktop" in text or text == "true")


def network_check(config: Config, remote: bool = False) -> Check:
    """doctor's line on setting ``network`` (issue 24): what is cut, and how a list goes
    through the session's proxy (container/egress.py), which a remote engine cannot reach."""
    listed = isinstance(config["network"], list)
    detail = ("network off: --network none (only lo inside); a list of hosts: --network none too, "
              "and a forwarder on 127.0.0.1:3128 inside relays to the session's proxy on this host "
              "through a unix socket (the egress record, as the overlay engine's; the image needs "
              "python3); direct attempts (off or a list) are refused at once and recorded: a helper "
              "container from container.image makes the watched pair in the container's network "
              "namespace (where it cannot, they fail unrecorded: egress.log says why)")
    if listed and remote:
        return Check(NETWORK_CHECK, False, "network is a list of hosts, whose proxy a remote engine "
                     "cannot reach (its socket is on this host): every call is refused", NETWORK_LIST_FIX)
    return Check(NETWORK_CHECK, True, detail, NETWORK_LIST_FIX, warn=True)
