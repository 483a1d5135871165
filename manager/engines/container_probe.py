"""What ``workspace doctor`` checks for the podman and docker engines, each with its fix.

Driven through the engine's CLI (not python-on-whales): these run on every
``auto`` engine choice, where a 200 ms import would be paid for nothing.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from manager.engines.base import Check
from manager.session import paths

if TYPE_CHECKING:
    from manager.engines.container import ContainerEngine

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


def _call(argv: list[str], timeout: float = TIMEOUT) -> tuple[int, str]:
    """(exit status, stderr or stdout): a missing binary or a hang is output, not a traceback."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return 127, f"{argv[0]} not found"
    except subprocess.TimeoutExpired:
        return 124, f"`{' '.join(argv[:3])}` did not answer within {timeout:.0f} s"
    text = proc.stderr.strip() if proc.returncode else proc.stdout.strip()
    return proc.returncode, text.splitlines()[-1] if text else ""


def image_missing(text: str) -> bool:
    lowered = text.lower()
    return any(s in lowered for s in ("no such image", "image not known", "failed to find image"))


def build_fix(cli: str) -> str:
    return f"build it: `workspace image build --engine {cli}` (no registry needed)"


def quick_reason(cli: str, image: str) -> str | None:
    """The cheap part of :func:`checks`, for choosing an engine: one client call."""
    if shutil.which(cli) is None:
        return f"{cli} not found (fix: {INSTALL_FIX[cli]})"
    rc, text = _call([cli, "image", "inspect", "--format", "{{.Id}}", image], timeout=15)
    if rc == 0:
        return None
    if image_missing(text):
        return f"the sandbox image {image} is missing (fix: {build_fix(cli)})"
    return f"{cli} does not answer: {text} (fix: {DAEMON_FIX[cli]})"


def checks(engine: ContainerEngine) -> list[Check]:
    cli, image = engine.cli, engine.config["container.image"]
    found = shutil.which(cli)
    result = [Check("engine found", found is not None, found or f"{cli} not on PATH",
                    INSTALL_FIX[cli])]
    steps = (_daemon, _image, _runs, _overlay)
    for step in steps:
        if not all(c.ok for c in result):
            result.append(Check(step.__doc__ or step.__name__, False, NOT_CHECKED))
            continue
        result.append(step(engine, cli, image))
    return result


def _daemon(engine: ContainerEngine, cli: str, image: str) -> Check:
    """daemon reachable"""
    argv = ([cli, "version", "--format", "{{.Server.Version}}"] if cli == "docker"
            else [cli, "info", "--format", "{{.Version.Version}}"])
    rc, text = _call(argv, timeout=15)
    return Check("daemon reachable", rc == 0, f"version {text}" if rc == 0 else text,
                 DAEMON_FIX[cli])


def _image(engine: ContainerEngine, cli: str, image: str) -> Check:
    """image present"""
    rc, text = _call([cli, "image", "inspect", "--format", "{{.Id}}", image])
    detail = f"{image} ({text.removeprefix('sha256:')[:12]})" if rc == 0 else f"{image}: {text}"
    return Check("image present", rc == 0, detail, build_fix(cli))


def _runs(engine: ContainerEngine, cli: str, image: str) -> Check:
    """can run a container"""
    rc, text = _call([cli, "run", "--rm", "--pull", "never", "--network", "none", image, "true"])
    return Check("can run a container", rc == 0, text if rc else "",
                 "see the error; `workspace doctor` output and the engine's log tell more")


def _overlay(engine: ContainerEngine, cli: str, image: str) -> Check:
    """overlay mounts work"""
    root = Path(tempfile.mkdtemp(prefix="workspace-probe-"))
    try:
        return _overlay_in(engine, cli, image, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _overlay_in(engine: ContainerEngine, cli: str, image: str, root: Path) -> Check:
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


def _mount_argv(engine: ContainerEngine, lower: str, upper: str, work: str,
                calls: str) -> list[str]:
    """The CLI flags for the engine's mount options (the probe does not use python-on-whales)."""
    options = engine.mount_options(lower, upper, work, calls)
    argv: list[str] = []
    for mount in options.get("mounts", []):
        argv += ["--mount", ",".join(mount)]
    for volume in options.get("volumes", []):
        argv += ["-v", ":".join(volume)]
    return argv


# -- container.upper: auto ------------------------------------------------------


def host_overlay_works(engine: ContainerEngine) -> bool:
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
        shutil.rmtree(root, ignore_errors=True)
    if ok:   # a failure may be passing (daemon restarting): ask again next time
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("ok\n")
    return ok


def _remote(cli: str) -> bool:
    """The engine runs elsewhere (a VM, another machine): host paths are not its paths."""
    host = os.environ.get("DOCKER_HOST" if cli == "docker" else "CONTAINER_HOST", "")
    if host and not host.startswith("unix://"):
        return True
    argv = ([cli, "info", "--format", "{{.OperatingSystem}}"] if cli == "docker"
            else [cli, "info", "--format", "{{.Host.ServiceIsRemote}}"])
    rc, text = _call(argv, timeout=15)
    return rc == 0 and ("Docker Desktop" in text or text == "true")
