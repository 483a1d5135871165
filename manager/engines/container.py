"""The podman and docker engines: one long-lived container per session.

The project is mounted at its own absolute path through an overlay whose upper
directory (``sandbox/upper``) persists on the host, so paths and the working
directory match the host and the shared change model reads the changes. Docker
mounts the overlay through its local volume driver, podman through ``:O,upperdir=``;
either way the engine mounts it on the host, so the container needs no
``CAP_SYS_ADMIN``. ``$HOME`` and ``/tmp`` are overlaid the same way, and the host's CA
bundle is mounted read-only (:mod:`manager.engines.container_view`); the image is
``container.image`` or the project's devcontainer (:mod:`manager.engines.container_image`).
Each call is an ``exec`` through ``container_enter.sh`` (no
Python on that path); creating, inspecting and removing containers goes
through python-on-whales, imported only when needed (it costs ~150-200 ms).

Volume mode (``container.upper: volume``, for engines in a VM: Docker Desktop,
podman machine) keeps the overlay inside the engine instead: a named volume
holds upper/ and work/, the project is bind-mounted read-only as the lower layer,
and the container (with ``CAP_SYS_ADMIN``, dropped again for the calls) mounts
the overlay itself. ``upper/`` on the host is then a copy: the volume's upper is
exported into it as a tar stream (:mod:`manager.changes.tarstream`) for review and on
``release``, and pushed into a fresh volume when the next container starts.
The ``volume`` mark says which side holds the truth: while it exists, the volume.

Sandbox layout::

    upper/ work/        the overlay's upper and work directories (work is the kernel's)
    volume              volume mode: the volume holds changes not yet exported to upper/
    calls/              bind-mounted at /run/ws-calls: ws-exec's call registry and cwd marks
    container.pid       "PID START" of the container's init on the host (the lean path's check)
    container.lock      flock held while a container is created or removed
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from manager.changes.model import Layer
from manager.config import Config
from manager.engines import procs
from manager.engines.base import Check
from manager.engines.base import RunRequest
from manager.engines.base import Streams
from manager.engines.container_probe import resource_name
from manager.errors import EngineUnavailable
from manager.errors import WorkspaceError
from manager.fsutil import locked
from manager.fsutil import write_json_atomic
from manager.session import paths
from manager.session.store import Session

if TYPE_CHECKING:
    from python_on_whales import DockerClient

ENTER_SCRIPT = Path(__file__).with_name("container_enter.sh")
PID_FILE = "container.pid"
LABEL = "org.workspace.session"
# The state directory that made a container: gc only ever touches its own (engines are shared).
STATE_LABEL = "org.workspace.state"
CALLS_MOUNT = "/run/ws-calls"
VOLUME_MARK = "volume"
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
# Characters the mount option syntaxes (CSV, `-v a:b:opts`, overlay's `o=`) cannot carry.
UNSAFE_PATH_CHARS = frozenset(',:"\\\n')


@dataclass(frozen=True)
class Labelled:
    """A container some session of this state directory made."""

    engine: str
    id: str
    name: str
    session: str


class ContainerEngine:
    """Shared by docker and podman; subclasses name the client and the overlay syntax."""

    name = "container"
    cli = ""
    session_format = ""   # `ps --format` template printing the session label

    def __init__(self, config: Config) -> None:
        self.config = config

    # -- availability -------------------------------------------------------

    def health_check(self) -> str | None:
        from manager.engines import container_probe

        return container_probe.quick_reason(self.cli, self.config["container.image"])

    def checks(self) -> list[Check]:
        from manager.engines import container_probe

        return container_probe.checks(self)

    # -- sandbox ------------------------------------------------------------

    def layers(self, session: Session) -> list[Layer]:
        from manager.engines import container_view

        _remember_births(session.sandbox / BIRTHS)
        return [Layer(upper=session.sandbox / "upper", target=session.project_path),
                *container_view.layers(session)]

    def container_name(self, session: Session) -> str:
        return resource_name(session.id)

    def prepare(self, session: Session) -> None:
        if container_pid(session.sandbox) is not None:
            return
        with self._lock(session):
            if container_pid(session.sandbox) is None:
                self._start(session)

    @contextlib.contextmanager
    def _lock(self, session: Session) -> Iterator[None]:
        # One creator or remover at a time, so two containers never mount one upper dir.
        session.sandbox.mkdir(parents=True, exist_ok=True)
        with locked(session.sandbox / "container.lock", timeout=120,
                    what=f"the container of session {session.id}"):
            yield

    def _start(self, session: Session) -> None:
        client = self.client()
        name = self.container_name(session)
        volume = self.upper_mode(session) == "volume"
        with self._engine_errors(session):
            self._remove_stale(client, name)
            image = self._image(client, session)
            for sub in ("upper", "work", "calls"):
                (session.sandbox / sub).mkdir(parents=True, exist_ok=True)
            fresh = volume and self._make_volume(client, session)
            if not volume:   # the host overlay makes real births from now on
                (session.sandbox / BIRTHS).unlink(missing_ok=True)
            options = self.volume_options(session) if volume else \
                self.mount_options(*_mount_paths(session))
            from manager.engines import container_view

            if volume:   # the project alone
                container_view.write_visible(session, [])
            else:        # $HOME, /tmp and the CA bundle too
                options = container_view.add_view(self, session, options,
                                                  str(session.sandbox / "calls"))
            container = client.container.run(
                image, detach=True, name=name, pull="never",
                labels=self.labels(session), **options, **self.identity(), **self.limits())
            self._require_limits(client, container, session)
            if volume:
                self._fill_volume(session, fresh)
            self._make_home(client, name, session)
            pid = int(container.state.pid or 0)
        start = procs.start_time(pid) if pid else None
        # pid 0: not visible here (the engine runs in a VM); the lean path then skips its check.
        (session.sandbox / PID_FILE).write_text(f"{pid if start else 0} {start or 0}\n")

    # -- volume mode ----------------------------------------------------------

    def upper_mode(self, session: Session) -> str:
        """"host" or "volume" for the session's next container."""
        if (session.sandbox / VOLUME_MARK).exists():
            return "volume"   # its volume holds changes not exported yet
        wanted = str(self.config["container.upper"])
        if wanted != "auto":
            return wanted
        from manager.engines import container_probe

        return "host" if container_probe.host_overlay_works(self) else "volume"

    def volume_name(self, session: Session) -> str:
        return resource_name(session.id)

    def _make_volume(self, client: DockerClient, session: Session) -> bool:
        """The session's volume; True when made afresh (so the host's upper must fill it)."""
        name = self.volume_name(session)
        if (session.sandbox / VOLUME_MARK).exists():
            if client.volume.exists(name):
                return False
            # Lost (removed by hand): what it held since the last export is gone.
            print(f"workspace: volume {name} of session {session.id} is gone; continuing "
                  f"from the last exported changes", file=sys.stderr)
            (session.sandbox / VOLUME_MARK).unlink()
        if client.volume.exists(name):   # left over, never marked: stale by definition
            client.volume.remove(name)
        client.volume.create(name, labels=self.labels(session))
        return True

    def volume_options(self, session: Session) -> dict[str, Any]:
        project, _, _, calls = _mount_paths(session)
        return {"volumes": [(self.volume_name(session), VOLUME_MOUNT),
                            (project, LOWER_MOUNT, "ro"), (calls, CALLS_MOUNT)],
                **VOLUME_SECURITY}

    def _fill_volume(self, session: Session, fresh: bool) -> None:
        """Push the host's upper into a fresh volume (then mark it), and mount the overlay."""
        name = self.container_name(session)
        if fresh:
            self._push_upper(session)
            (session.sandbox / VOLUME_MARK).write_text(self.volume_name(session) + "\n")
        # The overlay's root is the upper dir's root: it takes the project's owner and mode,
        # or a caller who is not root could not write in the project's top directory.
        upper = f"{VOLUME_MOUNT}/upper"
        mount = (f'chown --reference={LOWER_MOUNT} {upper} && '
                 f'chmod --reference={LOWER_MOUNT} {upper} && mkdir -p "$1" && '
                 f'mount -t overlay overlay -o lowerdir={LOWER_MOUNT},upperdir={upper},'
                 f'workdir={VOLUME_MOUNT}/work "$1"')
        proc = self._exec_root(name, ["sh", "-c", mount, "sh", session.project])
        if proc.returncode != 0:
            raise EngineUnavailable(
                f"the container of session {session.id} cannot mount its overlay: "
                f"{proc.stderr.decode(errors='replace').strip()}",
                hint="volume mode needs CAP_SYS_ADMIN in the container and overlayfs in the "
                     "engine's kernel (see docs/containers.md); or set container.upper: host")

    def _push_upper(self, session: Session) -> None:
        from manager.changes import tarstream

        argv = self._exec_argv(self.container_name(session), [
            "sh", "-c", f'mkdir -p {VOLUME_MOUNT}/upper {VOLUME_MOUNT}/work && '
                        f'chmod 700 {VOLUME_MOUNT} && exec tar -C {VOLUME_MOUNT}/upper '
                        f'{shlex.join(TAR_FLAGS)} -xpf -'], stdin=True)
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdin is not None and proc.stderr is not None
        try:
            tarstream.pack(session.sandbox / "upper", proc.stdin)
        finally:
            proc.stdin.close()
        err = proc.stderr.read()
        if proc.wait() != 0:
            raise EngineUnavailable(f"could not fill the volume of session {session.id}: "
                                    f"{err.decode(errors='replace').strip()}")

    def export_upper(self, session: Session) -> None:
        """Replace the host's ``upper/`` with the volume's (a running container's) upper."""
        from manager.changes import tarstream

        scratch = session.sandbox / "upper.export"
        _rmtree(scratch)
        # Birth times go along (the conflict check compares them with the real files' ctimes);
        # the copies made here are born now.
        # (Debian's find has no statx, so `-printf %B` says -1: stat reads it.)
        script = (f'cd {VOLUME_MOUNT} && (cd upper && find . -mindepth 1 -exec stat --printf '
                  f'"%.9W %n\\0" {{}} +) >births && exec tar {shlex.join(TAR_FLAGS)} '
                  '-cf - births upper')
        argv = self._exec_argv(self.container_name(session), ["sh", "-c", script])
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout is not None
        side: dict[str, bytes] = {}
        try:
            side = tarstream.unpack(proc.stdout, scratch, root="upper")
        finally:
            _, err = proc.communicate()
        if proc.returncode != 0:
            _rmtree(scratch)
            raise EngineUnavailable(f"could not export the changes of session {session.id}: "
                                    f"{err.decode(errors='replace').strip()}",
                                    hint="they are still in the engine's volume "
                                         f"{self.volume_name(session)}; rerun once it works")
        _swap(scratch, session.sandbox / "upper")
        births = _parse_births(side.get("births", b""), session.sandbox / "upper")
        write_json_atomic(session.sandbox / BIRTHS, births)

    def refresh(self, session: Session) -> None:
        """Bring the host's copy of the changes up to date (volume mode) before they are read."""
        if not (session.sandbox / VOLUME_MARK).exists():
            return
        try:
            self.prepare(session)
            with self._lock(session):
                self.export_upper(session)
        except WorkspaceError as exc:
            print(f"workspace: showing the changes exported last; {exc}", file=sys.stderr)

    def _exec_argv(self, name: str, argv: list[str], stdin: bool = False) -> list[str]:
        return [self.cli_path(), "exec", *(["-i"] if stdin else []), "-u", "0", name, *argv]

    def _exec_root(self, name: str, argv: list[str]) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(self._exec_argv(name, argv), capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=120)

    def labels(self, session: Session) -> dict[str, str]:
        return {LABEL: session.id, "org.workspace.project": session.project,
                STATE_LABEL: str(paths.state_home())}

    def labelled(self) -> list[Labelled]:
        """Containers of this state directory's sessions, running or not (for gc).

        Through the CLI, not python-on-whales: gc should not pay its import.
        An engine that is missing or does not answer has none.
        """
        if shutil.which(self.cli) is None:
            return []
        argv = [self.cli, "ps", "-a", "--filter", f"label={STATE_LABEL}={paths.state_home()}",
                "--format", "{{.ID}} {{.Names}} " + self.session_format]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return []
        found = []
        for line in proc.stdout.splitlines() if proc.returncode == 0 else []:
            parts = line.split()
            if len(parts) == 3:
                found.append(Labelled(self.name, *parts))
        return found

    def remove_orphan(self, found: Labelled) -> None:
        """Remove a container whose session record is gone (its upper dir went with it)."""
        proc = subprocess.run([self.cli, "rm", "-f", "-v", found.id], capture_output=True,
                              text=True, timeout=120, stdin=subprocess.DEVNULL)
        if proc.returncode != 0 and "no such container" not in proc.stderr.lower():
            raise WorkspaceError(f"{self.cli} could not remove container {found.name}: "
                                 f"{proc.stderr.strip()}")
        # Volume mode's volume: its session is gone, so nothing can read it any more.
        subprocess.run([self.cli, "volume", "rm", resource_name(found.session)],
                       capture_output=True, timeout=120, stdin=subprocess.DEVNULL)

    def _remove_stale(self, client: DockerClient, name: str) -> None:
        """A container left from before (stopped, or its daemon restarted): replace it."""
        from python_on_whales.exceptions import NoSuchContainer

        with contextlib.suppress(NoSuchContainer):
            client.container.remove(name, force=True, volumes=True)

    def _image(self, client: DockerClient, session: Session) -> str:
        """``container.image``, else the project's trusted devcontainer (built once)."""
        from manager.engines import container_image

        image, spec = container_image.choose(self.config, session.project_path)
        container_image.ensure(self.cli_path(), image, spec, bool(self.config["container.network"]))
        if not client.image.exists(image):
            raise EngineUnavailable(
                f"the sandbox image {image} is not in {self.cli}",
                hint=f"build it with `workspace image build --engine {self.cli}`"
                     if image == self.config["container.image"] else
                     f"`{self.cli} pull {image}` (workspace never pulls), or set container.image")
        return image

    def _make_home(self, client: DockerClient, name: str, session: Session) -> None:
        """$HOME at the host's path, owned by the caller: tools expect a writable home.

        Usually overlaid already (container_view); where not (volume mode, $HOME in the
        project) it lives in the container and is discarded with it.
        """
        home = os.environ.get("HOME", "")
        project = session.project_path
        if not home or home == "/" or _inside(Path(home), project) or _inside(project, Path(home)):
            return
        uid_gid = f"{os.getuid()}:{os.getgid()}"
        client.container.execute(name, ["sh", "-c", 'mkdir -p "$1" && chown "$2" "$1"', "sh",
                                        home, uid_gid], user="0")

    def mount_options(self, lower: str, upper: str, work: str, calls: str) -> dict[str, Any]:
        """``run`` options mounting ``lower`` at its own path over ``upper``, and ``calls``."""
        raise NotImplementedError

    def identity(self) -> dict[str, Any]:
        """``run`` options that make the caller's uid inside the container the caller's outside."""
        return {}

    def clear_work(self, session: Session) -> None:
        from manager.engines import container_view

        for work in [session.sandbox / "work", *container_view.work_dirs(session)]:
            self.clear_work_dir(work)

    def clear_work_dir(self, work: Path) -> None:
        """Leave an overlay's work dir removable by the caller once its container is gone.

        The engine's overlay makes ``work/work`` (mode 000) as its own root: the daemon's
        (docker) or the caller's first subordinate uid (rootless podman). Only the engine
        can remove it; without this, the session directory could never be deleted.
        """
        inner = work / "work"
        try:
            if inner.lstat().st_uid == os.geteuid():
                return
        except FileNotFoundError:
            return
        proc = subprocess.run(self.as_engine_root(str(work), ["rm", "-rf", "--", "/w/work"]),
                              capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        if proc.returncode != 0 or os.path.lexists(inner):
            raise EngineUnavailable(
                f"{self.cli} could not clear the overlay work dir {inner}: {proc.stderr.strip()}",
                hint=f"check the engine (`workspace doctor --engine {self.name}`), then retry")

    def as_engine_root(self, work: str, argv: list[str]) -> list[str]:
        """A command run as the engine's root with ``work`` at /w: a throwaway container."""
        return [self.cli_path(), "run", "--rm", "--pull", "never", "--network", "none",
                "-v", f"{work}:/w", self.config["container.image"], *argv]

    def limits(self) -> dict[str, Any]:
        cfg = self.config
        opts: dict[str, Any] = {}
        if not cfg["container.network"]:
            opts["networks"] = ["none"]
        if cfg["container.memory"]:
            # Swap equal to memory: the limit is a real one, not memory plus as much swap.
            opts["memory"] = opts["memory_swap"] = cfg["container.memory"]
        if cfg["container.pids"]:
            opts["pids_limit"] = cfg["container.pids"]
        if cfg["container.cpus"]:
            opts["cpus"] = cfg["container.cpus"]
        return opts

    def _require_limits(self, client: DockerClient, container: Any, session: Session) -> None:
        """Limits the engine took and then ignores (rootless podman on cgroup v1) are none."""
        cfg, host = self.config, container.host_config
        ignored = [name for name, wanted, got in (
            ("container.memory", cfg["container.memory"], host.memory),
            ("container.pids", cfg["container.pids"], host.pids_limit),
            ("container.cpus", cfg["container.cpus"], host.nano_cpus)) if wanted and not got]
        if ignored:
            client.container.remove(container, force=True, volumes=True)
            raise EngineUnavailable(
                f"{self.cli} does not apply {', '.join(ignored)} here (rootless podman cannot "
                f"on cgroup v1, nor on cgroup v2 without delegated controllers)",
                hint=f"unset {', '.join(ignored)}, or use an engine that applies limits "
                     "(docker, rootful podman)")

    def client(self) -> DockerClient:
        try:
            from python_on_whales import DockerClient
        except ImportError as exc:
            raise EngineUnavailable(f"python-on-whales is not installed: {exc}",
                                    hint="it is a dependency of workspace: reinstall it "
                                         "(`pip install workspace-sandbox`, or rerun the "
                                         "plugin's bootstrap)") from exc
        return DockerClient(client_call=[self.cli])

    @contextlib.contextmanager
    def _engine_errors(self, session: Session) -> Iterator[None]:
        """The engine's own failures as one clear error that says the changes are safe."""
        from python_on_whales.exceptions import DockerException

        try:
            yield
        except DockerException as exc:
            raise EngineUnavailable(
                f"{self.cli} failed for session {session.id}: {_stderr(exc)}\n"
                f"the session's changes are safe in {session.sandbox / 'upper'}",
                hint=f"check the engine (`workspace doctor --engine {self.name}`); "
                     "once it works again, rerun the command") from exc

    def run(self, session: Session, request: RunRequest) -> int:
        env = dict(os.environ, WORKSPACE_NO_FALLBACK="1")
        return run_entry(self.entry_argv(session, request), env, request.streams())

    def entry_argv(self, session: Session, request: RunRequest) -> list[str]:
        timeout = "" if request.timeout is None else f"{request.timeout:g}"
        return ["/bin/bash", str(ENTER_SCRIPT), self.cli_path(), self.container_name(session),
                str(session.sandbox), session.id, sys.executable, request.cwd,
                str(request.cwd_out or ""), timeout, f"{os.getuid()}:{os.getgid()}",
                request.command]

    def cli_path(self) -> str:
        return shutil.which(self.cli) or self.cli

    def release(self, session: Session) -> None:
        busy = running_calls(session.sandbox)
        if busy:
            raise WorkspaceError(
                f"commands are still running in session {session.id} "
                f"(calls {', '.join(busy)})",
                hint="wait for them to finish or stop them, then try again")
        if (session.sandbox / VOLUME_MARK).exists():
            self.prepare(session)   # a container to export through (the old one may be gone)
        with self._lock(session):
            if (session.sandbox / VOLUME_MARK).exists():
                self.export_upper(session)
                (session.sandbox / VOLUME_MARK).unlink()
            if (session.sandbox / "calls").exists():   # a container was made at some point
                self._remove(session)
                self.clear_work(session)
            (session.sandbox / PID_FILE).unlink(missing_ok=True)

    def _remove(self, session: Session) -> None:
        from python_on_whales.exceptions import NoSuchContainer
        from python_on_whales.exceptions import NoSuchVolume

        client = self.client()
        with self._engine_errors(session):
            with contextlib.suppress(NoSuchContainer):
                # -v: the overlay's volume record goes too; the upper dir stays.
                client.container.remove(self.container_name(session), force=True, volumes=True)
            with contextlib.suppress(NoSuchVolume):   # volume mode: exported by now
                client.volume.remove(self.volume_name(session))

    def destroy(self, session: Session) -> None:
        self.release(session)
        if session.sandbox.exists():
            shutil.rmtree(session.sandbox)


class DockerEngine(ContainerEngine):
    """docker: the overlay is a local-driver volume the daemon mounts on the host."""

    name = "docker"
    cli = "docker"
    session_format = '{{.Label "org.workspace.session"}}'

    def mount_options(self, lower: str, upper: str, work: str, calls: str) -> dict[str, Any]:
        # The daemon mounts as root, so opaque marks would be trusted.overlay.* xattrs, which an
        # ordinary caller cannot read back: for one, overlayfs writes user.overlay.* instead.
        extra = ",userxattr" if os.geteuid() != 0 else ""
        # The quotes are CSV quoting: `o=` holds commas.
        overlay = ["type=volume", f"dst={lower}", "volume-driver=local",
                   "volume-opt=type=overlay", "volume-opt=device=overlay",
                   f'"volume-opt=o=lowerdir={lower},upperdir={upper},workdir={work}{extra}"']
        return {"mounts": [overlay], "volumes": [(calls, CALLS_MOUNT)]}


class PodmanEngine(ContainerEngine):
    """podman, rootful or rootless: `-v SRC:DST:O,upperdir=U,workdir=W` keeps the upper dir."""

    name = "podman"
    cli = "podman"
    session_format = '{{index .Labels "org.workspace.session"}}'

    def mount_options(self, lower: str, upper: str, work: str, calls: str) -> dict[str, Any]:
        return {"volumes": [(calls, CALLS_MOUNT),
                            (lower, lower, f"O,upperdir={upper},workdir={work}")]}

    def identity(self) -> dict[str, Any]:
        # Rootless, uid N inside is subordinate uid N-1 outside unless kept: files the sandbox
        # writes would not be the caller's, and the caller's own files not writable.
        return {"userns": "keep-id"} if rootless_podman() else {}

    def as_engine_root(self, work: str, argv: list[str]) -> list[str]:
        # Rootless: the engine's root is the caller in their own user namespace; no container.
        if rootless_podman():
            return [self.cli_path(), "unshare", *[a.replace("/w/", work + "/") for a in argv]]
        return super().as_engine_root(work, argv)


def rootless_podman() -> bool:
    """podman run by an ordinary user talks to no service: it is rootless."""
    return os.geteuid() != 0 and not os.environ.get("CONTAINER_HOST")


def _mount_paths(session: Session) -> tuple[str, str, str, str]:
    sandbox = session.sandbox
    paths = (session.project, str(sandbox / "upper"), str(sandbox / "work"), str(sandbox / "calls"))
    for path in paths:
        if UNSAFE_PATH_CHARS & set(path):
            raise EngineUnavailable(
                f"cannot mount {path!r} into a container: the engine's mount syntax cannot "
                "carry ',', ':', '\"' or '\\' in a path",
                hint="use a path without them (e.g. through a symlink) or the overlay engine")
    return paths


def _parse_births(raw: bytes, upper: Path) -> dict[str, int]:
    """``stat --printf "%.9W %n\\0"`` output (names ./REL) as {absolute host path: ns}.

    Unknown births (0 or -1) are skipped: the copy's own time stands in.
    """
    births: dict[str, int] = {}
    for record in raw.split(b"\0"):
        stamp, _, name = record.partition(b" ")
        sec, _, frac = stamp.decode(errors="replace").partition(".")
        rel = name.removeprefix(b"./")
        if rel and sec.isdigit() and int(sec) > 0 and (frac.isdigit() or not frac):
            births[str(upper / os.fsdecode(rel))] = int(sec) * 10**9 + int(frac[:9].ljust(9, "0"))
    return births


def _remember_births(path: Path) -> None:
    """Volume mode: the host's copies were born at export; the conflict check needs the real
    births (``btime``)."""
    from manager.commit import btime

    with contextlib.suppress(OSError, ValueError):
        btime.remember(json.loads(path.read_text()))


def _rmtree(path: Path) -> None:
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


def _swap(new: Path, current: Path) -> None:
    old = current.with_name(current.name + ".old")
    _rmtree(old)
    if current.exists():
        current.rename(old)
    new.rename(current)
    _rmtree(old)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _stderr(exc: Exception) -> str:
    text = str(getattr(exc, "stderr", "") or exc).strip()
    return text.splitlines()[-1] if text else repr(exc)


def container_pid(sandbox: Path) -> int | None:
    """The live container init's host pid (0 when not visible here), else None."""
    try:
        pid_text, start = (sandbox / PID_FILE).read_text().split()
        pid = int(pid_text)
        return pid if pid == 0 or str(procs.start_time(pid)) == start else None
    except (OSError, ValueError):
        return None


def running_calls(sandbox: Path) -> list[str]:
    """Calls ws-exec registered whose host client is still alive."""
    calls = sandbox / "calls"
    if container_pid(sandbox) is None or not calls.is_dir():
        return []
    busy = []
    for entry in calls.iterdir():
        if entry.suffix == ".m":
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):  # emptied: finished
            host_pid = int(entry.read_text().split()[1])
            if host_pid and Path(f"/proc/{host_pid}").exists():
                busy.append(entry.name)
    return busy


def run_entry(argv: list[str], env: dict[str, str],
              streams: Streams = (None, None, None)) -> int:
    """Run the entry script with stdio inherited; it alone gets our signals.

    The script turns TERM/INT/HUP into ``ws-exec --kill`` inside the container;
    signalling the exec client as well would only lose the command's status.
    """
    stdin, stdout, stderr = streams
    proc = subprocess.Popen(argv, env=env, preexec_fn=procs.die_with_parent,  # noqa: PLW1509
                            stdin=stdin, stdout=stdout, stderr=stderr)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signum)

    previous = {s: signal.signal(s, forward) for s in procs.FORWARDED}
    try:
        return procs.exit_status(proc.wait())
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
