"""The podman and docker engines: one long-lived container per session.

The project is mounted at its own absolute path through an overlay whose upper
directory (``sandbox/upper``) persists on the host, so paths and the working
directory match the host and the shared change model reads the changes. Docker
mounts the overlay through its local volume driver, podman through ``:O,upperdir=``;
either way the engine mounts it on the host, so the container needs no
``CAP_SYS_ADMIN``. Each call is an ``exec`` through ``container_enter.sh`` (no
Python on that path); creating, inspecting and removing containers goes
through python-on-whales, imported only when needed (it costs ~150-200 ms).

Sandbox layout::

    upper/ work/        the overlay's upper and work directories (work is the kernel's)
    calls/              bind-mounted at /run/ws-calls: ws-exec's call registry and cwd marks
    container.pid       "PID START" of the container's init on the host (the lean path's check)
    container.lock      flock held while a container is created or removed
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from typing import Any

from manager import paths
from manager.changes import Layer
from manager.config import Config
from manager.engines import procs
from manager.engines.base import Check
from manager.engines.base import RunRequest
from manager.errors import EngineUnavailable
from manager.errors import WorkspaceError
from manager.fsutil import locked
from manager.store import Session

if TYPE_CHECKING:
    from python_on_whales import DockerClient

ENTER_SCRIPT = Path(__file__).with_name("container_enter.sh")
PID_FILE = "container.pid"
LABEL = "org.workspace.session"
# The state directory that made a container: gc only ever touches its own (engines are shared).
STATE_LABEL = "org.workspace.state"
CALLS_MOUNT = "/run/ws-calls"
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
        return [Layer(upper=session.sandbox / "upper", target=session.project_path)]

    def container_name(self, session: Session) -> str:
        return f"workspace-{session.id}"

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
        if self.config["container.mount_home"]:
            raise EngineUnavailable("container.mount_home is not implemented for podman/docker yet",
                                    hint="unset it; only the project is overlaid")
        client = self.client()
        name = self.container_name(session)
        with self._engine_errors(session):
            self._remove_stale(client, name)
            self._require_image(client)
            for sub in ("upper", "work", "calls"):
                (session.sandbox / sub).mkdir(parents=True, exist_ok=True)
            container = client.container.run(
                self.config["container.image"], detach=True, name=name, pull="never",
                labels=self.labels(session),
                **self.mount_options(*_mount_paths(session)), **self.limits())
            self._make_home(client, name, session)
            pid = int(container.state.pid or 0)
        (session.sandbox / PID_FILE).write_text(f"{pid} {procs.start_time(pid) if pid else 0}\n")

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

    def _remove_stale(self, client: DockerClient, name: str) -> None:
        """A container left from before (stopped, or its daemon restarted): replace it."""
        from python_on_whales.exceptions import NoSuchContainer

        with contextlib.suppress(NoSuchContainer):
            client.container.remove(name, force=True, volumes=True)

    def _require_image(self, client: DockerClient) -> None:
        image = self.config["container.image"]
        if not client.image.exists(image):
            raise EngineUnavailable(
                f"the sandbox image {image} is not in {self.cli}",
                hint=f"build it with `workspace image build --engine {self.cli}`")

    def _make_home(self, client: DockerClient, name: str, session: Session) -> None:
        """$HOME at the host's path, owned by the caller: tools expect a writable home.

        It lives in the container and is discarded with it (unless ``mount_home``).
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

    def client(self) -> DockerClient:
        try:
            from python_on_whales import DockerClient
        except ImportError as exc:
            raise EngineUnavailable(f"python-on-whales is not installed: {exc}",
                                    hint="pip install 'workspace-sandbox[containers]'") from exc
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
        return run_entry(self.entry_argv(session, request), env)

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
        with self._lock(session):
            if (session.sandbox / "calls").exists():   # a container was made at some point
                self._remove(session)
            (session.sandbox / PID_FILE).unlink(missing_ok=True)

    def _remove(self, session: Session) -> None:
        from python_on_whales.exceptions import NoSuchContainer

        with self._engine_errors(session), contextlib.suppress(NoSuchContainer):
            # -v: the overlay's volume record goes too; the upper dir stays.
            self.client().container.remove(self.container_name(session), force=True,
                                           volumes=True)

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
        # The quotes are CSV quoting: `o=` holds commas.
        overlay = ["type=volume", f"dst={lower}", "volume-driver=local",
                   "volume-opt=type=overlay", "volume-opt=device=overlay",
                   f'"volume-opt=o=lowerdir={lower},upperdir={upper},workdir={work}"']
        return {"mounts": [overlay], "volumes": [(calls, CALLS_MOUNT)]}


class PodmanEngine(ContainerEngine):
    """podman (rootful): `-v SRC:DST:O,upperdir=U,workdir=W` keeps the upper dir."""

    name = "podman"
    cli = "podman"
    session_format = '{{index .Labels "org.workspace.session"}}'

    def mount_options(self, lower: str, upper: str, work: str, calls: str) -> dict[str, Any]:
        return {"volumes": [(calls, CALLS_MOUNT),
                            (lower, lower, f"O,upperdir={upper},workdir={work}")]}


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


def run_entry(argv: list[str], env: dict[str, str]) -> int:
    """Run the entry script with stdio inherited; it alone gets our signals.

    The script turns TERM/INT/HUP into ``ws-exec --kill`` inside the container;
    signalling the exec client as well would only lose the command's status.
    """
    proc = subprocess.Popen(argv, env=env, preexec_fn=procs.die_with_parent)  # noqa: PLW1509

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signum)

    previous = {s: signal.signal(s, forward) for s in procs.FORWARDED}
    try:
        return procs.exit_status(proc.wait())
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
