"""The podman and docker engines: one long-lived container per session.

The project is mounted at its own absolute path through an overlay whose upper
directory (``sandbox/upper``) persists on the host, so paths and the working
directory match the host and the shared change model reads the changes. Docker
mounts the overlay through its local volume driver, podman through ``:O,upperdir=``;
either way the engine mounts it on the host, so the container needs no
``CAP_SYS_ADMIN``. ``$HOME`` and ``/tmp`` are overlaid the same way (rootless podman:
``$HOME`` entry by entry around podman's storage, :mod:`manager.engines.container.levels`),
and the host's CA bundle is mounted read-only (:mod:`manager.engines.container.view`); the image is
``container.image`` or the project's devcontainer (:mod:`manager.engines.container.image`).
Volume mode keeps the overlay inside the engine instead (see
:mod:`manager.engines.container.upper`). Each call is an ``exec`` through
``container_enter.sh`` (no Python on that path). Every other command goes through
the engine's CLI client (:mod:`manager.engines.container.cli`), whose typed errors
become one clear error here; docker and podman differ only in the two classes at
the end.

Sandbox layout::

    upper/ work/        the overlay's upper and work directories (work is the kernel's)
    upperdir/ workdir/  $HOME's and /tmp's (container_view), in the overlay engine's layout
    overlaid.json       the directories overlaid besides the project (each one layer)
    skeleton/ levels.json  rootless podman: $HOME's levels' lower dirs, and their times
                        (container_levels)
    visible             host paths shown inside as they are (the entry script's list)
    volume              volume mode: the volume holds changes not yet exported to upper/
    calls/              bind-mounted at /run/ws-calls: ws-exec's call registry and cwd marks
    marks/              the host's: a call's cwd mark, renamed here from calls/ before it is read
    running/            the calls' host-side records ("PID START" of the entry script)
    container.pid       "PID START NAME MODE" of the container's init on the host (the lean
                        path's check; MODE volume or host: how the container was made)
    container.ids       its user namespace's maps, read from the host as it starts (container_ids)
    container.lock      flock held while a container is created or removed
    network.json        the ``network`` policy the container was made with (egress/launch.py)
    egress/ egress.pid  a list of hosts: the proxy's socket (mounted at /run/ws-egress), its
    egress.log egress.jsonl  "PID START", its stderr, its record (container/egress.py)
    remote engine.env   a remote engine (container_remote): where it is, for sessions and the
    lower.manifest      entry script; what the project's volume holds; the last sync's cost
    lower.sync.json
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from manager import ui
from manager.changes.model import Layer
from manager.config import Config
from manager.engines import procs
from manager.engines.base import Check
from manager.engines.base import RunRequest
from manager.engines.base import Streams
from manager.engines.container import remote as container_remote
from manager.engines.container import upper as container_upper
from manager.engines.container.base import PID_FILE
from manager.engines.container.base import container_of
from manager.engines.container.base import lower_volume_name
from manager.engines.container.base import resource_name
from manager.engines.container.cli import ContainerClient
from manager.engines.container.cli import ContainerCommandError
from manager.engines.container.cli import Labelled
from manager.engines.container.cli import Started
from manager.errors import EngineUnavailable
from manager.errors import WorkspaceError
from manager.fs.util import locked
from manager.session import paths
from manager.session.paths import is_within as _inside
from manager.session.store import Session

ENTER_SCRIPT = Path(__file__).with_name("enter.sh")
LABEL = "org.workspace.session"
# The state directory that made a container: gc only ever touches its own (engines are shared).
STATE_LABEL = "org.workspace.state"


class ContainerEngine:
    """Shared by docker and podman; subclasses name the client and the overlay syntax."""

    name = "container"
    cli = ""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.client = ContainerClient(self.cli)
        self.where = container_remote.connect(self.cli, config) if self.cli else None
        self._replacing = False

    # -- availability -------------------------------------------------------

    def health_check(self) -> str | None:
        from manager.engines.container import probe as container_probe
        return container_probe.quick_reason(self.cli, self.config["container.image"])

    def checks(self) -> list[Check]:
        from manager.engines.container import probe as container_probe
        remote = self.where is not None and self.where.remote
        return [*container_probe.checks(self), container_probe.network_check(self.config, remote)]

    # -- sandbox ------------------------------------------------------------

    def layers(self, session: Session) -> list[Layer]:
        from manager.engines.container import ids as container_ids
        from manager.engines.container import view as container_view
        container_upper.remember_births(session)
        ids = container_ids.review_map(session.sandbox)
        return [Layer(upper=session.sandbox / "upper", target=session.project_path, ids=ids),
                *container_view.layers(session, ids)]

    def container_name(self, session: Session) -> str:
        return container_of(session)

    def prepare(self, session: Session) -> None:
        from manager.engines.container import direct as container_direct
        from manager.engines.container import egress as container_egress

        self._network_changed(session)
        if container_pid(session.sandbox) is not None and container_egress.alive(session):
            return
        with self._lock(session):
            pid = container_pid(session.sandbox)
            if pid is None:
                self._start(session)
            elif not container_egress.alive(session):   # its proxy died: another
                container_egress.restart(session, pid)
                container_direct.attach(self, session, self.container_name(session))

    def _network_changed(self, session: Session) -> None:
        """A container made for another ``network`` than the configuration's now is replaced
        (release refuses while commands still run in it)."""
        from manager.egress import launch

        if self._replacing or container_pid(session.sandbox) is None or \
                not launch.changed(session.sandbox, self.config, session.project):
            (session.sandbox / launch.STALE).unlink(missing_ok=True)
            return
        self._replacing = True   # release's own prepare (volume mode's export) must not recurse
        try:
            self.release(session)
        finally:
            self._replacing = False
        (session.sandbox / launch.STALE).unlink(missing_ok=True)

    @contextlib.contextmanager
    def _lock(self, session: Session) -> Iterator[None]:
        # One creator or remover at a time, so two containers never mount one upper dir.
        session.sandbox.mkdir(parents=True, exist_ok=True)
        with locked(session.sandbox / "container.lock", timeout=120,
                    what=f"the container of session {session.id}"):
            yield

    def _start(self, session: Session) -> None:
        remote = self.where is not None and self.where.remote
        volume = remote or container_upper.upper_mode(self, session) == "volume"
        with self._engine_errors(session):
            # Left from before (stopped, or its daemon restarted), under the name it was made with.
            self.client.remove(self.container_name(session))
            (session.sandbox / PID_FILE).unlink(missing_ok=True)
            name = resource_name(session.id)
            image = self._image(session, volume)
            for sub in ("upper", "work", "calls", "running", "marks"):
                (session.sandbox / sub).mkdir(parents=True, exist_ok=True)
            labels = self.labels(session)
            fresh = volume and container_upper.make_volume(self.client, session, labels)
            if not volume:
                container_upper.forget_births(session)
            options = container_upper.volume_options(session) if volume else \
                self.mount_options(*container_upper.mount_paths(session))
            if remote:   # nothing of this host is mounted: the project goes into a volume
                assert self.where is not None
                container_remote.mark(session, self.where)
                container_remote.ensure_lower(self.client, session, labels)
                options = container_remote.volume_options(session, container_upper.volume_name(session),
                                                    container_upper.VOLUME_MOUNT)
            options, overlaid = self._view(session, options, volume)
            options, proxy = self._egress(session, options, remote)
            from manager.engines.container import direct as container_direct
            from manager.engines.container import egress as container_egress

            helper = None
            try:
                started = self.client.start(image, name, labels,
                                            {**options, **self.identity(), **self.limits(session.project)})
                self._require_limits(started)
                # The watched pair, made while the rest of the start runs (off: if it records).
                if proxy is not None and container_egress.listed(self.config, session):
                    helper = container_direct.begin(self, session, name)
                    self._proxy_ready(proxy, session, started)
                elif proxy is not None and container_direct.recorder_ready(proxy, session, started.pid):
                    helper = container_direct.begin(self, session, name)
            finally:
                if proxy is not None and proxy.poll() is None and proxy.stdin and not proxy.stdin.closed:
                    proxy.kill()   # never told a container: it would wait for one
            if remote:
                container_remote.sync_lower(self.client, session, self.config)
            if volume:
                container_upper.fill_volume(self.client, session, fresh, remote)
                from manager.engines.container import hide as container_hide

                container_hide.mask_volume(self.client, name, self.config, session)
            self._make_home(name, session, overlaid)
            if helper is not None:
                container_direct.finish(session, helper)
        start = procs.start_time(started.pid) if started.pid and not remote else None
        from manager.engines.container import ids as container_ids

        # Owners are reviewed where the host's upper is the overlay's own (host mode).
        container_ids.record(session.sandbox, started.pid if start and not volume else 0)
        # pid 0: not visible here (the engine runs in a VM); the lean path then skips its check.
        (session.sandbox / PID_FILE).write_text(
            f"{started.pid if start else 0} {start or 0} {name} {'volume' if volume else 'host'}\n")

    def _egress(self, session: Session, options: dict[str, Any],
                remote: bool) -> tuple[dict[str, Any], subprocess.Popen[bytes] | None]:
        """Setting ``network`` (the policy status and the hook read), and with a list the
        session's proxy and its forwarder (container_egress)."""
        from manager.egress import launch
        from manager.engines.container import egress as container_egress

        launch.write_policy(session.sandbox, self.config, session.project)
        if not container_egress.recorded(self.config, session) or \
                (remote and not container_egress.listed(self.config, session)):
            return options, None   # off on a remote engine: unrecorded (its socket is here)
        if not container_egress.listed(self.config, session):   # off: a recorder only
            from manager.engines.container import direct as container_direct

            return options, container_direct.recorder(session)
        if remote:
            raise EngineUnavailable(
                "network is a list of hosts, whose proxy a remote engine cannot reach (its "
                "socket is on this host)", hint="network: off, or a local engine")
        return container_egress.options(session, options), container_egress.spawn(session)

    def _proxy_ready(self, proxy: subprocess.Popen[bytes], session: Session, started: Started) -> None:
        from manager.engines.container import egress as container_egress

        try:
            container_egress.ready(proxy, session, started.pid)
        except EngineUnavailable:
            self.client.remove(started.id)
            raise

    def refresh(self, session: Session) -> None:
        """Bring the host's copy of the changes up to date (volume mode) before they are read."""
        if not container_upper.in_volume(session):
            return
        try:
            self.prepare(session)
            with self._lock(session):
                container_upper.export_upper(self.client, session, self._export_helper(session))
        except WorkspaceError as exc:
            ui.err(f"workspace: showing the changes exported last; {exc}")

    def _export_helper(self, session: Session) -> list[str]:
        return container_upper.export_helper(self.client, session, self.identity())

    def labels(self, session: Session) -> dict[str, str]:
        return {LABEL: session.id, "org.workspace.project": session.project,
                STATE_LABEL: str(paths.state_home())}

    def labelled(self) -> list[Labelled]:
        """Containers of this state directory's sessions, running or not (for gc).

        Through the CLI, not python-on-whales: gc should not pay its import.
        An engine that is missing or does not answer has none.
        """
        # Only what it can prove is its own: anyone on the daemon can label a container so,
        # but only a session id is id-shaped, and only this state directory's sessions make
        # the name resource_name spells (an older unsuffixed one is left: it cannot be told).
        found = [row for row in self.client.labelled(self.name, STATE_LABEL,
                                                     str(paths.state_home()), LABEL)
                 if paths.valid_id(row.session) and row.name == resource_name(row.session)]
        return found + container_remote.orphan_volumes(self.client, self.name, found,
                                                       STATE_LABEL, str(paths.state_home()))

    def remove_orphan(self, found: Labelled) -> None:
        """Remove a container whose session record is gone (its upper dir went with it)."""
        try:
            if found.id:   # "": volumes alone (container_remote.orphan_volumes)
                self.client.remove_container(found.id)
        except ContainerCommandError as exc:
            raise WorkspaceError(f"{self.cli} could not remove container {found.name}: "
                                 f"{exc.stderr.strip()}") from exc
        # Volume mode's volumes: its session is gone, so nothing can read them any more. (A
        # label is anyone's to write: an id no session could have names no volume of ours.)
        if paths.valid_id(found.session):
            self.client.remove_volume_quietly(resource_name(found.session))
            self.client.remove_volume_quietly(lower_volume_name(found.session))

    def _image(self, session: Session, volume: bool) -> str:
        """``container.image``, else the project's trusted devcontainer (built once)."""
        from manager.engines.container import image as container_image
        image, spec = container_image.choose(self.config, session.project_path)
        if volume:
            container_image.refuse_build_in_volume_mode(spec)
        image = container_image.qualified(self.cli, image)
        container_image.ensure(self.client.path(), image, spec,
                               bool(self.config["container.network"]))
        if self.cli == "podman":
            container_image.require_resolved(self.client, image)
        if not self.client.image_exists(image):
            raise EngineUnavailable(
                f"the sandbox image {image} is not in {self.cli}",
                hint=f"build it with `workspace image build --engine {self.cli}`"
                     if image == self.config["container.image"] else
                     f"`{self.cli} pull {image}` (workspace never pulls), or set container.image")
        return image

    def _view(self, session: Session, options: dict[str, Any],
              volume: bool) -> tuple[dict[str, Any], list[str]]:
        """Host mode: $HOME, /tmp and the CA bundle too; the entry script's visible paths.
        Also the host directories overlaid besides the project."""
        from manager.engines.container import hide as container_hide
        from manager.engines.container import view as container_view

        if volume:   # the project alone
            container_view.write_visible(session, [])
            return options, []   # masked inside, over the overlay (container_hide.mask_volume)
        options, overlaid = container_view.add_view(self, session, options,
                                                    str(session.sandbox / "calls"))
        shown = [session.project, *overlaid]
        return container_hide.masked(self.config, session, options, shown), overlaid

    def _make_home(self, name: str, session: Session, overlaid: list[str]) -> None:
        """$HOME at the host's path, owned by the caller: tools expect a writable home.

        Usually overlaid already (container_view); where not (volume mode, rootless podman,
        $HOME in the project) it lives in the container and is discarded with it. A project
        below it is mounted there, but $HOME itself is then the container's own directory,
        made by the runtime as root's: it is given to the caller too.
        """
        home = os.environ.get("HOME", "")
        if not home or home == "/" or _inside(Path(home), session.project_path) \
                or os.path.realpath(home) in overlaid:
            return
        uid_gid = f"{os.getuid()}:{os.getgid()}"
        self.client.exec_root(name, ["sh", "-c", 'mkdir -p "$1" && chown "$2" "$1"', "sh",
                                     home, uid_gid])

    def mount_options(self, lower: str, upper: str, work: str, calls: str,
                      target: str | None = None) -> dict[str, Any]:
        """``run`` options mounting ``lower`` at ``target`` (default: its own path) over
        ``upper``, and ``calls``."""
        raise NotImplementedError

    def identity(self) -> dict[str, Any]:
        """``run`` options that make the caller's uid inside the container the caller's outside."""
        return {}

    def clear_work(self, session: Session) -> None:
        from manager.engines.container import view as container_view
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
        failed = ""
        try:
            self.client.run(self.as_engine_root(str(work), ["rm", "-rf", "--", "/w/work"]))
        except ContainerCommandError as exc:
            failed = exc.stderr.strip()
        if failed or os.path.lexists(inner):
            raise EngineUnavailable(
                f"{self.cli} could not clear the overlay work dir {inner}: {failed}",
                hint=f"check the engine (`workspace doctor --engine {self.name}`), then retry")

    def as_engine_root(self, work: str, argv: list[str]) -> list[str]:
        """A command run as the engine's root with ``work`` at /w: a throwaway container."""
        return [self.cli_path(), "run", "--rm", "--pull", "never", "--network", "none",
                "-v", f"{work}:/w", self.config["container.image"], *argv]

    def limits(self, project: str | None = None) -> dict[str, Any]:
        cfg = self.config
        opts: dict[str, Any] = {}
        from manager.egress import launch  # setting `network` too: off unless both open

        if not launch.container_network(cfg, project):
            opts["networks"] = ["none"]
        if cfg["container.memory"]:
            # Swap equal to memory: the limit is a real one, not memory plus as much swap.
            opts["memory"] = opts["memory_swap"] = cfg["container.memory"]
        if cfg["container.pids"]:
            opts["pids_limit"] = cfg["container.pids"]
        if cfg["container.cpus"]:
            opts["cpus"] = cfg["container.cpus"]
        return opts

    def _require_limits(self, started: Started) -> None:
        """Limits the engine took and then ignores (rootless podman on cgroup v1) are none."""
        cfg = self.config
        ignored = [name for name, wanted, got in (
            ("container.memory", cfg["container.memory"], started.memory),
            ("container.pids", cfg["container.pids"], started.pids_limit),
            ("container.cpus", cfg["container.cpus"], started.nano_cpus)) if wanted and not got]
        if ignored:
            self.client.remove(started.id)
            raise EngineUnavailable(
                f"{self.cli} does not apply {', '.join(ignored)} here (rootless podman cannot "
                f"on cgroup v1, nor on cgroup v2 without delegated controllers)",
                hint=f"unset {', '.join(ignored)}, or use an engine that applies limits "
                     "(docker, rootful podman)")

    @contextlib.contextmanager
    def _engine_errors(self, session: Session) -> Iterator[None]:
        """The engine's own failures as one clear error that says the changes are safe."""
        try:
            yield
        except ContainerCommandError as exc:
            raise EngineUnavailable(
                f"{self.cli} failed for session {session.id}: {exc.last_line()}\n"
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
        return self.client.path()

    def running(self, session: Session) -> list[str]:
        return running_calls(session.sandbox)

    def release(self, session: Session) -> None:
        busy = running_calls(session.sandbox)
        if busy:
            raise WorkspaceError(
                f"commands are still running in session {session.id} "
                f"(calls {', '.join(busy)})",
                hint="wait for them to finish or stop them, then try again")
        if container_upper.in_volume(session):
            self.prepare(session)   # a container to export through (the old one may be gone)
        with self._lock(session):
            if container_upper.in_volume(session):
                container_upper.export_upper(self.client, session, self._export_helper(session))
                (session.sandbox / container_upper.VOLUME_MARK).unlink()
                container_upper.stamp_export(session)
            if (session.sandbox / "calls").exists():   # a container was made at some point
                self._remove(session)
                self.clear_work(session)
            from manager.engines.container import egress as container_egress

            container_egress.stop(session)
            (session.sandbox / PID_FILE).unlink(missing_ok=True)

    def _remove(self, session: Session) -> None:
        with self._engine_errors(session):
            # -v: the overlay's volume record goes too; the upper dir stays.
            self.client.remove(self.container_name(session))
            # Volume mode's volume: exported by now.
            self.client.remove_volume(container_upper.volume_name(session))

    def destroy(self, session: Session) -> None:
        self.release(session)
        if (session.sandbox / "remote").exists():   # a remote session's copy of the project
            with self._engine_errors(session):
                self.client.remove_volume(lower_volume_name(session.id))
        if session.sandbox.exists():
            shutil.rmtree(session.sandbox)


class DockerEngine(ContainerEngine):
    """docker: the overlay is a local-driver volume the daemon mounts on the host."""

    name = "docker"
    cli = "docker"

    def mount_options(self, lower: str, upper: str, work: str, calls: str,
                      target: str | None = None) -> dict[str, Any]:
        # The daemon mounts as root, so opaque marks would be trusted.overlay.* xattrs, which an
        # ordinary caller cannot read back: for one, overlayfs writes user.overlay.* instead.
        extra = ",userxattr" if os.geteuid() != 0 else ""
        # The quotes are CSV quoting: `o=` holds commas.
        overlay = ["type=volume", f"dst={target or lower}", "volume-driver=local",
                   "volume-opt=type=overlay", "volume-opt=device=overlay",
                   f'"volume-opt=o=lowerdir={lower},upperdir={upper},workdir={work}{extra}"']
        return {"mounts": [overlay], "volumes": [(calls, container_upper.CALLS_MOUNT)]}


class PodmanEngine(ContainerEngine):
    """podman, rootful or rootless: `-v SRC:DST:O,upperdir=U,workdir=W` keeps the upper dir."""

    name = "podman"
    cli = "podman"

    def mount_options(self, lower: str, upper: str, work: str, calls: str,
                      target: str | None = None) -> dict[str, Any]:
        return {"volumes": [(calls, container_upper.CALLS_MOUNT),
                            (lower, target or lower, f"O,upperdir={upper},workdir={work}")]}

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


def container_pid(sandbox: Path) -> int | None:
    """The live container init's host pid (0 when not visible here), else None."""
    try:
        pid_text, start = (sandbox / PID_FILE).read_text().split()[:2]
        pid = int(pid_text)
        return pid if pid == 0 or str(procs.start_time(pid)) == start else None
    except (OSError, ValueError):
        return None


def running_calls(sandbox: Path) -> list[str]:
    """Calls whose entry script (recorded in ``running/`` by its pid and start time) lives.

    Only the host writes ``running/``; ``calls/`` is the container's to write, so a record
    there (``x 1``: host pid 1, alive forever) must never hold commit back. A record whose
    process is gone, or is another process now (same pid, other start time), is stale:
    removed.
    """
    running = sandbox / "running"
    if container_pid(sandbox) is None or not running.is_dir():
        return []
    busy = []
    for entry in running.iterdir():
        with contextlib.suppress(OSError):
            fields = entry.read_text().split()
            if len(fields) != 2 or not all(f.isdigit() for f in fields):
                continue  # being written (or not ours): no call to wait for
            if str(procs.start_time(int(fields[0]))) == fields[1]:
                busy.append(entry.name)
            else:
                entry.unlink()
    return busy


def run_entry(argv: list[str], env: dict[str, str],
              streams: Streams = (None, None, None)) -> int:
    """Run the entry script with stdio inherited; it alone gets our signals.

    The script turns TERM/INT/HUP into ``ws-exec --kill`` inside the container;
    signalling the exec client as well would only lose the command's status.
    """
    stdin, stdout, stderr = streams
    proc = subprocess.Popen(argv, env=env, preexec_fn=procs.die_with_parent(),  # noqa: PLW1509
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
