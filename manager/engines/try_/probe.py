"""Finding binpash/try, reading its interface, and what it needs from the host.

The interface is read from ``try -h``, not ``try -v``: the tagged v0.2.0
release takes ``-D DIR`` and the main branch ``-N DIR`` (and gives ``-i`` a new
meaning), yet both report version 0.2.0.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import asdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from manager.engines.base import NETWORK_CHECK
from manager.engines.base import NETWORK_LIST_FIX
from manager.engines.base import Check
from manager.engines.overlay import probe as overlay_probe
from manager.engines.try_ import layout as try_layout
from manager.fs.util import remove_tree
from manager.fs.util import write_json_atomic

if TYPE_CHECKING:
    from manager.config import Config

INSTALL_HINT = ("install binpash/try (https://github.com/binpash/try): put its `try` script "
                "on PATH, or set try.path (`workspace config`)")
FORMS = {"-N": "main branch: -N DIR", "-D": "v0.2.0: -D DIR"}
_DIR_FLAG = re.compile(r"^\s*(-[ND]) DIR\b", re.MULTILINE)
_VERSION = re.compile(r"version\s+(\S+)")
PROBE_TIMEOUT = 30.0


@dataclass(frozen=True)
class TryInfo:
    path: str
    flag: str          # "-N" or "-D": work in DIR, without committing
    version: str
    mtime_ns: int
    size: int

    @property
    def form(self) -> str:
        return FORMS[self.flag]


def find(configured: str) -> Path | None:
    """``try.path`` when set, else ``try`` on PATH."""
    if configured:
        path = Path(configured).expanduser()
        return path if os.access(path, os.X_OK) and path.is_file() else None
    found = shutil.which("try")
    return Path(found) if found else None


def parse_usage(text: str) -> str | None:
    """``-N`` or ``-D`` from ``try -h`` output; None when it names neither."""
    match = _DIR_FLAG.search(text)
    return match.group(1) if match else None


def parse_version(text: str) -> str:
    match = _VERSION.search(text)
    return match.group(1) if match else "unknown"


def _run_try(path: Path, arg: str) -> str:
    # try creates mktemp files before it parses its options and leaves them: keep them here.
    with tempfile.TemporaryDirectory(prefix="workspace-try-") as tmp:
        env = dict(os.environ, TMPDIR=tmp)
        proc = subprocess.run([str(path), arg], capture_output=True, text=True, env=env,
                              stdin=subprocess.DEVNULL, timeout=PROBE_TIMEOUT)
    return proc.stdout + proc.stderr


class TryError(Exception):
    """try is present but unusable; the message says why."""


def inspect(path: Path) -> TryInfo:
    st = path.stat()
    try:
        usage = _run_try(path, "-h")
        version = parse_version(_run_try(path, "-v"))
    except (OSError, subprocess.SubprocessError) as exc:
        raise TryError(f"{path} does not run: {exc}") from exc
    flag = parse_usage(usage)
    if flag is None:
        raise TryError(f"{path} (version {version}) takes neither -N DIR nor -D DIR")
    return TryInfo(str(path), flag, version, st.st_mtime_ns, st.st_size)


def cached(path: Path, cache: Path) -> TryInfo:
    """``inspect`` remembered in ``cache`` until the script changes (path, mtime, size)."""
    st = path.stat()
    try:
        info = TryInfo(**json.loads(cache.read_text()))
        if (info.path, info.mtime_ns, info.size) == (str(path), st.st_mtime_ns, st.st_size):
            return info
    except (OSError, ValueError, TypeError):
        pass
    info = inspect(path)
    # Asked for before the sandbox is prepared too (a new plugin session builds its entry first).
    cache.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(cache, asdict(info), indent=None, sort_keys=False)
    return info


# -- doctor -------------------------------------------------------------------

# Said on every doctor report of try (not a failure: try works as designed).
NOT_A_BOUNDARY = Check(
    "security", True,
    "try is not a security boundary: it runs each command as root in a chroot by its own "
    "design (\"not a sandbox\"), and a command can leave it for the real filesystem; "
    "use engine: overlay (or podman/docker) to contain an agent")


def checks(configured: str) -> list[Check]:
    path = find(configured)
    where = f"try.path={configured}" if configured else "PATH"
    if path is None:
        return [Check("try installed", False, f"not found on {where}", INSTALL_HINT), NOT_A_BOUNDARY]
    result = [NOT_A_BOUNDARY, Check("try installed", True, str(path))]
    try:
        info = inspect(path)
    except TryError as exc:
        result.append(Check("try interface", False, str(exc),
                            "install try v0.2.0 or the main branch of binpash/try"))
        return result
    result.append(Check("try version", True, info.version))
    result.append(Check("try interface", True, info.form))
    result.extend(_tools(path, info))
    result.extend([overlay_probe._kernel(), overlay_probe._userns()])
    if all(c.ok for c in result):
        result.extend(trial(info))
    return result


def _tools(path: Path, info: TryInfo) -> list[Check]:
    needed = {"unshare": "util-linux", "flock": "util-linux", "find": "findutils"}
    if info.flag == "-D":
        needed["findmnt"] = "util-linux"  # v0.2.0 refuses to run without it
    if _needs_getfattr(path):
        needed["getfattr"] = "attr"  # try summary/commit read opaque directories with it
    found = []
    for tool, package in needed.items():
        where = shutil.which(tool)
        found.append(Check(f"{tool} installed", where is not None, where or "not found",
                           "" if where else f"install {package}"))
    return found


def _needs_getfattr(path: Path) -> bool:
    try:
        uses = "getfattr" in path.read_text(errors="replace")
    except OSError:
        return False
    return uses and shutil.which("try-summary") is None


def trial(info: TryInfo) -> list[Check]:
    """One call through our entry, in a scratch sandbox where sessions live (the state dir).

    Not in $TMPDIR: try can only show a directory inside its sandbox when it could
    overlay the top-level directory that holds it, and that is the state's, not /tmp's.
    """
    from manager.session import paths

    name = f"workspace-try-probe-{secrets.token_hex(4)}"
    paths.state_home().mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix="try-probe-", dir=paths.state_home()))
    try:
        proc, held, hidden = _trial_call(info, scratch, name)
    finally:
        cleanup = _remove_scratch(scratch)
    if proc is None:
        return [Check("trial run in a scratch sandbox", False,
                      f"no answer within {PROBE_TIMEOUT:.0f} s",
                      "run `try -n true` by hand to see where it hangs"), *cleanup]
    ok = proc.returncode == 0 and proc.stdout == "ok\n" and held
    detail = "works" if ok else (proc.stderr.strip() or f"exit {proc.returncode}")[-300:]
    fix = "" if ok else _trial_fix(detail, scratch)
    return [Check("trial run in a scratch sandbox", ok, detail, fix), _visibility(hidden),
            *cleanup]


def _trial_call(info: TryInfo, scratch: Path,
                name: str) -> tuple[subprocess.CompletedProcess[str] | None, bool, list[str]]:
    """The entry every call takes, writing ``scratch/name``: held in the upper dir, not real."""
    sandbox = scratch / "sandbox"
    try_layout.make_layout(sandbox)
    (sandbox / try_layout.OURS / "hide.list").write_text("")   # nothing to hide in a trial
    target = shlex.quote(str(scratch / name))
    argv = try_layout.entry_command(sandbox, "probe", info, "/", None,
                                   f"echo ok > {target} && cat {target}")
    env = dict(os.environ, WORKSPACE_NO_FALLBACK="1")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env,
                              stdin=subprocess.DEVNULL, timeout=PROBE_TIMEOUT)
    except subprocess.TimeoutExpired:
        return None, False, []
    upper = sandbox / "upperdir" / str(scratch).lstrip("/") / name
    held = upper.exists() and not (scratch / name).exists()
    return proc, held, _hidden_directories(sandbox)


def _remove_scratch(scratch: Path) -> list[Check]:
    try:
        remove_tree(scratch)
    except OSError as exc:
        return [Check("scratch sandbox removed", False, f"{scratch}: {exc}",
                      f"remove {scratch} by hand")]
    return []


def _hidden_directories(sandbox: Path) -> list[str]:
    """Directories try could not overlay: inside its sandbox they are empty."""
    try:
        log = (sandbox / try_layout.OURS / "try.log").read_text(errors="replace")
    except OSError:
        return []
    # "... as an overlay and mergerfs or unionfs not set", "... via mergerfs" (main, v0.2.0)
    return sorted(set(re.findall(r"Failed mounting (/\S*) (?:as an overlay|via )", log)))


def _visibility(hidden: list[str]) -> Check:
    """try leaves a directory with mounts below it empty unless its union helper works."""
    here = [str(Path.cwd()), str(Path.home())]
    blind = [d for d in hidden if any(p == d or p.startswith(d.rstrip("/") + "/") for p in here)]
    why = _union_helper_problem()
    detail = ("every directory overlaid" if not hidden else
              f"left empty inside try: {', '.join(hidden)}" + (f" ({why})" if why else ""))
    fix = ("" if not blind else
           f"{', '.join(blind)} (this project or $HOME) would look empty inside try: "
           f"{why or 'see the try.log of a session'}; or use engine overlay")
    return Check("project and $HOME visible inside try", not blind, detail, fix)


def _union_helper_problem() -> str:
    """Why try's mergerfs/unionfs (for directories with mounts below them) cannot work."""
    if not (shutil.which("mergerfs") or shutil.which("unionfs")):
        return "no mergerfs or unionfs-fuse: install mergerfs"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return ("mergerfs cannot open /dev/fuse as this user: give it mode 0666, as Debian's "
                "udev rules do (chmod 0666 /dev/fuse)")
    return ""


def _trial_fix(detail: str, scratch: Path) -> str:
    if "temproot//" in detail:  # try's own files under DIR, looked for inside its sandbox
        top = "/" + scratch.parts[1]
        return (f"try could not overlay {top}, the top-level directory that holds workspace's "
                f"state ({scratch.parent}): try never overlays /dev, and needs mergerfs for a "
                "directory with mounts below it (a non-root user also needs a /dev/fuse it may "
                "open). Set XDG_STATE_HOME to a directory elsewhere, or use engine overlay")
    if "overlay" in detail or "mount" in detail:
        return ("overlayfs must mount inside a user namespace (Linux >= 5.11, modprobe overlay); "
                "or use engine overlay, podman or docker")
    if "unshare" in detail or "Operation not permitted" in detail:
        return ("allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                "or on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0)")
    return "run `try -n true` by hand to see what fails; or use another engine"


def network_check(config: Config) -> Check:
    """doctor's line on setting ``network`` (issue 24): no proxy here, so what is cut and refused."""
    from manager.egress import launch

    path = find(config["try.path"])
    has_x = path is not None and launch.try_has_x(str(path))
    value = config["network"]
    runs = value == "open" or (value == "off" and has_x)
    cut = ("network off: try -x (a network namespace with only lo)" if has_x else
           "this try has no -x: network off is refused")
    # A list is not built for try: -x gives each call a fresh network namespace with only lo
    # (down), so a forwarder would have to start inside every call, and no process of the
    # session outlives its calls to hold the proxy (the overlay and container engines have one).
    detail = (f"{cut}; a list of hosts: refused (each try -x call gets an empty network namespace "
              "of its own: no proxy reaches it); no egress record")
    if not runs:
        fix = NETWORK_LIST_FIX if has_x else "install binpash/try main (it has -x), or use engine overlay"
        return Check(NETWORK_CHECK, False,
                     f"setting network is {value!r}, which this engine refuses: {detail}", fix)
    return Check(NETWORK_CHECK, True, detail, NETWORK_LIST_FIX, warn=True)
