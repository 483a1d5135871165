"""Where a container session's upper directory lives, and volume mode's copies of it.

Host mode mounts ``sandbox/upper`` itself. Volume mode (``container.upper: volume``,
for engines in a VM: Docker Desktop, podman machine) keeps the overlay inside the
engine: a named volume holds upper/ and work/, the project is bind-mounted
read-only as the lower layer, and the container (with ``CAP_SYS_ADMIN``, dropped
again for the calls) mounts the overlay itself. ``upper/`` on the host is then a
copy: the volume's upper is exported into it as a tar stream
(:mod:`manager.changes.tarstream`) for review and on ``release``, read by a fresh
container of the session's image (:func:`export_helper`: never a program of the session's
container, which a call may have replaced), and pushed into a
fresh volume when the next container starts. The ``volume`` mark says which side
holds the truth: while it exists, the volume.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import tarfile
from pathlib import Path
from typing import Any

from manager import ui
from manager.engines.container.base import EngineShape
from manager.engines.container.base import container_of
from manager.engines.container.base import resource_name
from manager.engines.container.cli import ContainerClient
from manager.engines.container.cli import ContainerCommandError
from manager.errors import EngineUnavailable
from manager.fs.util import write_json_atomic
from manager.session.store import Session

CALLS_MOUNT = "/run/ws-calls"
VOLUME_MARK = "volume"
EXPORTED = "exported"   # its mtime: when the export last rewrote the host's upper (session/reviewed)
BIRTHS = "upper.births"          # volume mode: {upper path: birth ns in the volume}
VOLUME_MOUNT = "/run/ws-vol"     # the named volume: upper/ and work/ (0700, root's)
LOWER_MOUNT = "/run/ws-lower"    # the project, read-only: the overlay's lower layer
# Tar options both ways: whiteouts are char devices, opaque dirs carry trusted.overlay.opaque.
# The overlay's marks, and the entries' own xattrs (review shows them; see changes/meta).
TAR_FLAGS = ["--numeric-owner", "--xattrs", "--xattrs-include=trusted.overlay.*",
             "--xattrs-include=user.*", "--xattrs-include=security.capability"]
# What the container needs to mount its own overlay: the capability, and no LSM veto
# (AppArmor's docker-default profile denies mount; SELinux labels the volume away).
VOLUME_SECURITY = {"cap_add": ["SYS_ADMIN"],
                   "security_options": ["apparmor=unconfined", "label=disable"]}
# So a root call's next call (every `exec` starts with the container's capabilities, the one
# above included) runs nothing the call could have replaced before it drops CAP_SYS_ADMIN:
# setpriv, its libraries and the loader, copied here as the container starts (before any
# call) and bound read-only over themselves (a bind the container made: rootless podman
# mounts the tmpfs from outside), which only CAP_SYS_ADMIN could undo; an empty directory over
# /etc/ld.so.preload, which the loader then cannot read (a root call could write that file).
# A top-level mount point: its parent cannot be renamed away. enter.sh names both paths.
PROLOGUE_DIR = "/.ws-prologue"
PROLOGUE_TMPFS = [f"{PROLOGUE_DIR}:exec,mode=0755,size=16m", "/etc/ld.so.preload:mode=0555,size=4k"]
INSTALL_PROLOGUE = (
    f'T={PROLOGUE_DIR}; cp -L /usr/bin/setpriv "$T/setpriv" && '
    'ldd /usr/bin/setpriv | { while read -r a b c _; do '
    '  if [ "$b" = "=>" ]; then [ -z "$c" ] || cp -L "$c" "$T/" || exit 1; '
    '  else case $a in /*) cp -L "$a" "$T/ld.so" || exit 1;; esac; fi; done; } && '
    'mount --bind "$T" "$T" && mount -o remount,bind,ro,nosuid,nodev "$T" && '
    'LC_ALL=C "$T/ld.so" --inhibit-cache --library-path "$T" "$T/setpriv" --bounding-set -sys_admin -- true')
# Characters the mount option syntaxes (CSV, `-v a:b:opts`, overlay's `o=`) cannot carry.
UNSAFE_PATH_CHARS = frozenset(',:"\\\n')


def mount_paths(session: Session) -> tuple[str, str, str, str]:
    """(project, upper, work, calls): what a session's container mounts."""
    sandbox = session.sandbox
    paths = (session.project, str(sandbox / "upper"), str(sandbox / "work"), str(sandbox / "calls"))
    for path in paths:
        if UNSAFE_PATH_CHARS & set(path):
            raise EngineUnavailable(
                f"cannot mount {path!r} into a container: the engine's mount syntax cannot "
                "carry ',', ':', '\"' or '\\' in a path",
                hint="use a path without them (e.g. through a symlink) or the overlay engine")
    return paths


def in_volume(session: Session) -> bool:
    """The volume holds changes not exported yet (the host's upper/ is behind)."""
    return (session.sandbox / VOLUME_MARK).exists()


def upper_mode(engine: EngineShape, session: Session) -> str:
    """"host" or "volume" for the session's next container."""
    if in_volume(session):
        return "volume"
    wanted = str(engine.config["container.upper"])
    if wanted != "auto":
        return wanted
    from manager.engines.container import probe as container_probe
    return "host" if container_probe.host_overlay_works(engine) else "volume"


def volume_name(session: Session) -> str:
    """The session's volume: the one its mark names while it holds changes (made by an
    older version, maybe under another name), else the one it will be made with."""
    with contextlib.suppress(OSError):
        marked = (session.sandbox / VOLUME_MARK).read_text().strip()
        if marked:
            return marked
    return resource_name(session.id)


def make_volume(client: ContainerClient, session: Session, labels: dict[str, str]) -> bool:
    """The session's volume; True when made afresh (so the host's upper must fill it)."""
    name = volume_name(session)
    if in_volume(session):
        if client.volume_exists(name):
            return False
        # Lost (removed by hand): what it held since the last export is gone.
        ui.err(f"workspace: volume {name} of session {session.id} is gone; continuing "
               f"from the last exported changes")
        (session.sandbox / VOLUME_MARK).unlink()
    if client.volume_exists(name):   # left over, never marked: stale by definition
        client.remove_volume(name)
    client.create_volume(name, labels)
    return True


def volume_options(session: Session) -> dict[str, Any]:
    project, _, _, calls = mount_paths(session)
    return {"volumes": [(volume_name(session), VOLUME_MOUNT),
                        (project, LOWER_MOUNT, "ro"), (calls, CALLS_MOUNT)],
            "tmpfs": PROLOGUE_TMPFS, **VOLUME_SECURITY}


def fill_volume(client: ContainerClient, session: Session, fresh: bool,
                remote: bool = False) -> None:
    """Push the host's upper into a fresh volume (then mark it), mount the overlay, cover
    the volume, and record the caller's groups in the image (:data:`GROUPS`)."""
    if fresh:
        push_upper(client, session)
        (session.sandbox / VOLUME_MARK).write_text(volume_name(session) + "\n")
    # The overlay's root is the upper dir's root: it takes the project's owner and mode,
    # or a caller who is not root could not write in the project's top directory.
    # Once mounted, the overlay holds its layers itself: the volume's own mount point is
    # covered by an empty read-only tmpfs, so no call reaches the upper or work directory
    # past the overlay (a root call renamed the upper away and every export failed; the
    # export reads the volume in a helper container of its own). Covered, not unmounted:
    # rootless podman's mounts are locked in the container's namespace.
    upper = f"{VOLUME_MOUNT}/upper"
    mount = (f"({INSTALL_PROLOGUE}) && " +
             (f"mount -o remount,bind,ro {LOWER_MOUNT} && " if remote else "") +   # its copy
             f'chown --reference={LOWER_MOUNT} {upper} && '
             f'chmod --reference={LOWER_MOUNT} {upper} && mkdir -p "$1" && '
             f'mount -t overlay overlay -o lowerdir={LOWER_MOUNT},upperdir={upper},'
             f'workdir={VOLUME_MOUNT}/work "$1" && '
             f'mount -t tmpfs -o ro,nosuid,nodev,noexec,size=4k,mode=0 ws-covered {VOLUME_MOUNT} && '
             '{ id -G "$2" 2>/dev/null || echo "$3"; }')
    uid, gid = os.getuid(), os.getgid()
    try:
        groups = client.exec_root(container_of(session),
                                  ["sh", "-c", mount, "sh", session.project, str(uid), str(gid)])
    except ContainerCommandError as exc:
        raise EngineUnavailable(
            f"the container of session {session.id} cannot mount its overlay: "
            f"{exc.stderr.strip()}",
            hint="volume mode needs CAP_SYS_ADMIN in the container and overlayfs in the "
                 "engine's kernel (see docs/containers.md); or set container.upper: host") from exc
    write_groups(session, groups.split(), gid)


GROUPS = "call.groups"   # volume mode: the groups a call of another uid than root takes


def write_groups(session: Session, words: list[str], gid: int) -> None:
    """The caller's groups as the image's own files gave them as the container started (no
    call had run): a call of another uid than root starts as root and drops to the caller
    through the prologue (enter.sh), which reads no file of the container's."""
    ids = [w for w in words if w.isdigit()] or [str(gid)]
    (session.sandbox / GROUPS).write_text(",".join(ids) + "\n")


def push_upper(client: ContainerClient, session: Session) -> None:
    from manager.changes import tarstream

    script = (f'mkdir -p {VOLUME_MOUNT}/upper {VOLUME_MOUNT}/work && chmod 700 {VOLUME_MOUNT} '
              f'&& exec tar -C {VOLUME_MOUNT}/upper {shlex.join(TAR_FLAGS)} -xpf -')
    try:
        client.exec_feeding(container_of(session), ["sh", "-c", script],
                            lambda pipe: tarstream.pack(session.sandbox / "upper", pipe))
    except ContainerCommandError as exc:
        raise EngineUnavailable(f"could not fill the volume of session {session.id}: "
                                f"{exc.stderr.strip()}") from exc


def export_helper(client: ContainerClient, session: Session,
                  identity: dict[str, Any]) -> list[str]:
    """The command line that runs a program to export with: a fresh container of the image
    the session's container was made from (so no program a call replaced: a call that is root
    in the session's container can replace any, and it holds CAP_SYS_ADMIN), the volume
    read-only, no network, only the capabilities reading needs (trusted.overlay.* marks:
    CAP_SYS_ADMIN; every entry: CAP_DAC_READ_SEARCH), as root (the volume's upper is 0700)."""
    container = container_of(session)
    image = client.run([client.path(), "container", "inspect", "--format", "{{.Image}}",
                        container]).strip()
    if not image:
        raise EngineUnavailable(f"could not tell the image of container {container}")
    userns = [f"--userns={identity['userns']}"] if identity.get("userns") else []
    return [client.path(), "run", "--rm", "--pull", "never", "--network", "none",
            "--user", "0:0", *userns, "--cap-drop", "ALL", "--cap-add", "DAC_READ_SEARCH",
            "--cap-add", "SYS_ADMIN", "--security-opt", "no-new-privileges",
            "--security-opt", "label=disable", "--entrypoint", "",
            "-v", f"{volume_name(session)}:{VOLUME_MOUNT}:ro", image]


def export_upper(client: ContainerClient, session: Session, helper: list[str]) -> None:
    """Replace the host's ``upper/`` with the volume's upper, read by ``helper``
    (:func:`export_helper`): nothing of the session's container runs."""
    import time

    from manager.changes import tarstream

    scratch = session.sandbox / "upper.export"
    rmtree(scratch)
    # Birth times go along (the conflict check compares them with the real files' ctimes);
    # the copies made here are born now.
    # (Debian's find has no statx, so `-printf %B` says -1: stat reads it.)
    # The volume is read-only there: births go first in the stream, as a tar member of their
    # own made in the helper's memory (/dev/shm).
    script = (f'b=/dev/shm/births && cd {VOLUME_MOUNT} && (cd upper && find . -exec stat '
              f'--printf "%.9W %n\\0" {{}} +) >"$b" && exec tar {shlex.join(TAR_FLAGS)} '
              '--sparse -cf - -C /dev/shm births -C "$PWD" upper')
    try:
        side = client.run_reading([*helper, "sh", "-c", script],
                                  lambda pipe: tarstream.unpack(pipe, scratch, root="upper"))
    except (ContainerCommandError, tarfile.TarError, EOFError) as exc:
        # A stream cut short (a remote engine's connection lost) is the same: nothing applied.
        rmtree(scratch)
        why = exc.stderr.strip() if isinstance(exc, ContainerCommandError) else \
            f"the stream from the engine ended early ({exc})"
        raise EngineUnavailable(f"could not export the changes of session {session.id}: {why}",
                                hint="they are still in the engine's volume "
                                     f"{volume_name(session)}; rerun once it works") from exc
    swap(scratch, session.sandbox / "upper")
    births = parse_births(side.get("births", b""), session.sandbox / "upper", time.time_ns())
    write_json_atomic(session.sandbox / BIRTHS, births)


def parse_births(raw: bytes, upper: Path, latest: int | None = None) -> dict[str, int]:
    """``stat --printf "%.9W %n\\0"`` output (names ./REL) as {absolute host path: ns}.

    Unknown births (0 or -1) are skipped: the copy's own time stands in. So is one after
    ``latest`` (the export's end): a birth in the future is no birth, and trusting it would
    make every real edit before it look older than the sandbox's copy (no conflict).
    """
    births: dict[str, int] = {}
    for record in raw.split(b"\0"):
        stamp, _, name = record.partition(b" ")
        sec, _, frac = stamp.decode(errors="replace").partition(".")
        rel = name.removeprefix(b"./")
        if rel and sec.isdigit() and int(sec) > 0 and (frac.isdigit() or not frac):
            ns = int(sec) * 10**9 + int(frac[:9].ljust(9, "0"))
            if latest is None or ns <= latest:
                births[str(upper / os.fsdecode(rel))] = ns
    return births


def remember_births(session: Session) -> None:
    """Volume mode: the host's copies were born at export; the conflict check needs the real
    births (``btime``)."""
    from manager.commit import btime

    with contextlib.suppress(OSError, ValueError):
        btime.remember(json.loads((session.sandbox / BIRTHS).read_text()))


def forget_births(session: Session) -> None:
    """Host mode: the host overlay makes real births from now on."""
    (session.sandbox / BIRTHS).unlink(missing_ok=True)


def rmtree(path: Path) -> None:
    """Remove a copied upper dir, read-only directories included."""
    if not path.exists():
        return
    for dirpath, dirnames, _ in os.walk(path):
        for name in dirnames:
            full = os.path.join(dirpath, name)
            if not os.path.islink(full):
                with contextlib.suppress(OSError):
                    os.chmod(full, 0o700)
    shutil.rmtree(path)


def swap(new: Path, current: Path) -> None:
    old = current.with_name(current.name + ".old")
    rmtree(old)
    if current.exists():
        current.rename(old)
    new.rename(current)
    rmtree(old)


def stamp_export(session: Session) -> None:
    """The export rewrote the host's upper: its entries' ctimes are ours, no process's
    (stamped after it, with the file system's clock; session/reviewed reads it)."""
    with contextlib.suppress(OSError):
        (session.sandbox / EXPORTED).touch()
        os.utime(session.sandbox / EXPORTED)
