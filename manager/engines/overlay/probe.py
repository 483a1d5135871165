"""What the overlay engine needs from the host, each check with its fix."""

from __future__ import annotations

import contextlib
import os
import platform
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from manager.engines.base import Check
from manager.engines.overlay.holder import names
from manager.errors import WorkspaceError
from manager.session import paths

MIN_KERNEL = (5, 11)  # overlayfs inside a user namespace
BOUNDARY_CHECK = "security"
IDENTITY_CHECK = "commands run as"
PROBE_IDLE_SECONDS = 60.0  # the trial's holder, should this process die before it stops it


def checks(network: bool = True) -> list[Check]:
    result = [_linux(), _kernel(), *_tools()]
    if all(c.ok for c in result):
        userns = _userns()
        result.append(userns)
        if userns.ok:
            result.append(_overlay_in_userns())
    if all(c.ok for c in result):
        reach: list[str] = []
        result.append(trial(reach))
        trial_ok = result[-1].ok
        if network:
            from manager.engines.overlay import netprobe  # setting `network`

            result.append(netprobe.check())
        result.append(identity())
        result.append(boundary(reach if trial_ok else "the trial call failed"))
    return result


def boundary(reach: list[str] | str) -> Check:
    """Which host kernel interfaces a command inside reaches, as measured by the trial
    (``reach``: what it reached, or why it could not tell): none, as root too."""
    if isinstance(reach, str):
        return Check(BOUNDARY_CHECK, True, f"warning: not measured ({reach})", warn=True)
    if not reach:
        return Check(BOUNDARY_CHECK, True, "writes anywhere are held for review; no handle to "
                     "the host's filesystem and no host kernel interface (/proc/sys, /sys, "
                     "devices) inside")
    from manager.engines.overlay import reach as overlay_reach

    return Check(BOUNDARY_CHECK, True,
                 f"warning: a command inside reaches {overlay_reach.summary(reach)}",
                 "run workspace from an ordinary account (with subordinate ids), or use "
                 "engine podman or docker", warn=True)


def identity() -> Check:
    """Which ids commands run as inside: a warning (never a failure) for the fallback."""
    from manager.engines.overlay import ids as overlay_ids
    maps = overlay_ids.plan()
    if maps.mode == overlay_ids.FULL:
        return Check(IDENTITY_CHECK, True, "root: every id mapped to itself")
    if maps.mode == overlay_ids.SUBORDINATE:
        return Check(IDENTITY_CHECK, True, "your own uid and gid; other ids from your "
                     "subordinate ranges (/etc/subuid, /etc/subgid)")
    return Check(IDENTITY_CHECK, True, f"warning: commands run as uid 0 inside, only it is "
                 f"mapped ({maps.why}); pip, npm and `id -u` see root",
                 "give the user subordinate ids (usermod --add-subuids 100000-165535 "
                 "--add-subgids 100000-165535 USER) and install uidmap (newuidmap)")


def trial(reach: list[str] | None = None) -> Check:
    """One call the way every call goes: holder start, the lean entry, a write held in the
    upper directory. In a scratch sandbox in the state directory, where sessions live.
    With ``reach``: then, in the same sandbox, what a command reaches of the host's kernel
    (overlay/reach.py), added to it."""
    from manager.engines.overlay import engine as overlay

    name = f"workspace-probe-{secrets.token_hex(4)}"
    try:
        root = paths.state_home() / "probe"
        root.mkdir(parents=True, exist_ok=True)
        sandbox = Path(tempfile.mkdtemp(prefix="overlay-", dir=root))
    except (OSError, WorkspaceError) as exc:
        return Check(overlay.TRIAL_CHECK, False, f"no scratch sandbox in the state directory: {exc}",
                     "set XDG_STATE_HOME to a writable directory on a local filesystem")
    try:
        overlay.start_holder(sandbox, "", PROBE_IDLE_SECONDS, "probe")
        enter = ["/bin/bash", str(overlay.ENTER_SCRIPT), str(sandbox), "probe", sys.executable,
                 "/", ""]
        env = dict(os.environ, WORKSPACE_NO_FALLBACK="1")
        proc = subprocess.run([*enter, f"echo ok > /tmp/{name} && cat /tmp/{name}"], env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=20)
        why = _failure(proc, held=(sandbox / names.UPPER / "tmp" / name).is_file())
        if not why and reach is not None:
            _measure(enter, env, reach)
    except (WorkspaceError, subprocess.TimeoutExpired) as exc:
        why = str(exc).split("\nhint:")[0]
    finally:
        _stop(sandbox)
    leaked = Path("/tmp", name)
    if leaked.exists():
        leaked.unlink()
        why = why or f"the write escaped to {leaked}"
    return Check(overlay.TRIAL_CHECK, not why, why or "works",
                 overlay.entry_fix(why) if why else "")


def _measure(enter: list[str], env: dict[str, str], reach: list[str]) -> None:
    from manager.engines.overlay import reach as overlay_reach

    found = overlay_reach.measure(enter, env)
    reach.extend([f"(unknown: {found})"] if isinstance(found, str) else found)


def _failure(proc: subprocess.CompletedProcess[str], held: bool) -> str:
    if proc.returncode != 0:
        return (proc.stderr.strip() or f"exit {proc.returncode}").removeprefix("workspace: ")
    if proc.stdout != "ok\n":
        return f"the sandbox read back {proc.stdout!r}, not 'ok'"
    return "" if held else "the write did not land in the upper directory"


def _stop(sandbox: Path) -> None:
    from manager.engines.overlay import engine as overlay
    pid = overlay.holder_pid(sandbox)
    if pid is not None:
        overlay._kill(pid)
    overlay.hand_back(sandbox, skeleton=True)
    with contextlib.suppress(OSError):
        overlay.remove_tree(sandbox)


def _linux() -> Check:
    ok = platform.system() == "Linux"
    return Check("linux", ok, platform.system(), "" if ok else "use engine podman or docker")


def _kernel() -> Check:
    release = platform.release()
    try:
        version = tuple(int(p) for p in release.split("-")[0].split(".")[:2])
    except ValueError:
        version = (0, 0)
    ok = version >= MIN_KERNEL
    return Check("kernel >= 5.11", ok, release,
                 "" if ok else "upgrade the kernel, or use engine podman or docker")


def _tools() -> list[Check]:
    found = []
    for tool in ("unshare", "nsenter", "mount"):
        path = shutil.which(tool)  # as every call finds it
        found.append(Check(f"{tool} installed", path is not None, path or "not found on PATH",
                           "" if path else "install util-linux and put it on PATH"))
    return found


def _run(argv: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return proc.returncode, (proc.stderr or proc.stdout).strip()


def _userns() -> Check:
    rc, out = _run(["unshare", "--user", "--map-root-user", "--mount", "true"])
    return Check("user + mount namespaces", rc == 0, out or "works",
                 "" if rc == 0 else "allow unprivileged user namespaces "
                 "(sysctl kernel.unprivileged_userns_clone=1, or on Ubuntu "
                 "kernel.apparmor_restrict_unprivileged_userns=0), or use podman/docker")


def _overlay_in_userns() -> Check:
    with tempfile.TemporaryDirectory(prefix="workspace-probe-") as tmp:
        for d in ("lower", "upper", "work", "merged"):
            os.mkdir(os.path.join(tmp, d))
        options = f"userxattr,lowerdir={tmp}/lower,upperdir={tmp}/upper,workdir={tmp}/work"
        script = f"mount -t overlay overlay -o {options} {tmp}/merged && touch {tmp}/merged/x"
        rc, out = _run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script])
        ok = rc == 0 and os.path.exists(os.path.join(tmp, "upper", "x"))
        return Check("overlayfs in a user namespace", ok, out or "works",
                     "" if ok else "needs Linux >= 5.11 with overlayfs (modprobe overlay); "
                     "or use engine podman or docker")
