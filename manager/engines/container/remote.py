"""Sessions on a container engine that is not on this machine (issue 26).

Where the engine is comes from the engines' own conventions: ``DOCKER_HOST``
(unix, tcp with TLS, ssh), ``DOCKER_CONTEXT`` or the context ``docker context use``
chose, ``CONTAINER_HOST`` and ``CONTAINER_CONNECTION`` for podman's remote client; the
setting ``container.host`` names a host URL or a context/connection and is put into
the environment of every client we run (python-on-whales and the entry script included).

A remote engine shares no filesystem with us, so volume mode
(:mod:`manager.engines.container.upper`) is implied and the two host paths it still
bind-mounts are replaced: the project is sent into a volume of its own (the overlay's
lower layer, made read-only before the overlay is mounted) and the call registry is a
tmpfs. Only what changed since the last sync is sent: a manifest of each entry's
mtime, size and mode, kept beside the session, says what the volume holds; a volume
that is new, or a sync that did not finish, sends everything again into a fresh volume.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO
from typing import TYPE_CHECKING

from manager.config import Config
from manager.engines.base import Check
from manager.engines.container.base import container_of
from manager.engines.container.base import lower_volume_name
from manager.engines.container.base import session_of
from manager.engines.container.cli import ContainerClient
from manager.engines.container.cli import ContainerCommandError
from manager.engines.container.cli import Labelled
from manager.errors import EngineUnavailable
from manager.fs.util import write_json_atomic

if TYPE_CHECKING:
    from manager.session.store import Session

SETTING = "container.host"
MARK = "remote"                  # in the sandbox: the session runs remotely (entry script reads it)
ENGINE_ENV = "engine.env"        # in the sandbox: VAR=value naming the engine, for the entry script
MANIFEST = "lower.manifest"      # {"token": the lower volume's, "entries": {rel: [mtime, size, mode]}}
SYNC_STATS = "lower.sync.json"   # the last sync: what was sent and how long it took
TOKEN_LABEL = "org.workspace.sync"
LOWER_MOUNT = "/run/ws-lower"
CALLS_MOUNT = "/run/ws-calls"
# The lower volume is written by the sync, then made read-only before the overlay is mounted.
READ_ONLY_LOWER = f"mount -o remount,bind,ro {LOWER_MOUNT} && "
# Variables naming the engine, per client: (a host URL, a context or connection name).
VARIABLES = {"docker": ("DOCKER_HOST", "DOCKER_CONTEXT"),
             "podman": ("CONTAINER_HOST", "CONTAINER_CONNECTION")}
LOCAL_SOCKETS = frozenset({"unix:///var/run/docker.sock", "unix:///run/docker.sock"})
URL_SCHEMES = ("unix://", "tcp://", "ssh://", "npipe://", "fd://")


@dataclass(frozen=True)
class Location:
    """Where one client's engine is: ``local`` (its default), a ``host`` URL or a ``context``."""

    cli: str
    kind: str
    value: str

    @property
    def remote(self) -> bool:
        return self.kind != "local" and not (self.kind == "host" and self.value in LOCAL_SOCKETS)

    def describe(self) -> str:
        if self.kind == "local":
            return "local"
        return self.value if self.kind == "host" else f"context {self.value}"


def location(cli: str, config: Config) -> Location:
    """The setting, else the client's own variables, else (docker) the context in use."""
    named = str(config.get(SETTING) or "")
    if named:
        return Location(cli, "host" if named.startswith(URL_SCHEMES) else "context", named)
    host_var, context_var = VARIABLES.get(cli, ("", ""))
    if os.environ.get(host_var):
        return Location(cli, "host", os.environ[host_var])
    if os.environ.get(context_var):   # "default": the local engine, whatever `context use` said
        chosen = os.environ[context_var]
        return Location(cli, "local", "") if chosen == "default" else \
            Location(cli, "context", chosen)
    current = _docker_current_context() if cli == "docker" else ""
    return Location(cli, "context", current) if current else Location(cli, "local", "")


def _docker_current_context() -> str:
    """The context ``docker context use`` chose (its config file), "" for the default."""
    folder = os.environ.get("DOCKER_CONFIG") or os.path.expanduser("~/.docker")
    try:
        name = json.loads(Path(folder, "config.json").read_text()).get("currentContext", "")
    except (OSError, ValueError, AttributeError):
        return ""
    return "" if name in ("", "default") else str(name)


def connect(cli: str, config: Config) -> Location:
    """Point every client this process starts at the setting's engine; the location."""
    where = location(cli, config)
    if config.get(SETTING):
        host_var, context_var = VARIABLES[cli]
        chosen, other = (host_var, context_var) if where.kind == "host" else (context_var, host_var)
        os.environ[chosen] = where.value
        os.environ.pop(other, None)
    return where


# -- the session's container ------------------------------------------------------


def lower_volume(session: Session) -> str:
    return lower_volume_name(session.id)


def mark(session: Session, where: Location) -> None:
    """Say the session runs remotely, and where: the entry script reads ``engine.env``."""
    host_var, context_var = VARIABLES[where.cli]
    variable = host_var if where.kind == "host" else context_var
    (session.sandbox / ENGINE_ENV).write_text(f"{variable}={where.value}\n")
    (session.sandbox / MARK).write_text(f"{where.cli} {where.describe()}\n")


def where_runs(sandbox: Path) -> str:
    """What ``workspace sessions`` shows: the engine's location, "local" when none recorded."""
    try:
        return (sandbox / MARK).read_text().split(" ", 1)[1].strip()
    except (OSError, IndexError):
        return "local"


def volume_options(session: Session, upper_volume: str, upper_mount: str) -> dict[str, object]:
    """``run`` options: the upper's and the project's volumes, the call registry in memory."""
    from manager.engines.container.upper import PROLOGUE_TMPFS
    from manager.engines.container.upper import VOLUME_SECURITY

    return {"volumes": [(upper_volume, upper_mount), (lower_volume(session), LOWER_MOUNT)],
            "tmpfs": [f"{CALLS_MOUNT}:mode=1777", *PROLOGUE_TMPFS], **VOLUME_SECURITY}


def ensure_lower(client: ContainerClient, session: Session, labels: dict[str, str]) -> None:
    """The project's volume, made afresh (with a new token) unless the manifest matches it."""
    name = lower_volume(session)
    token = _volume_token(client, name)
    if token is not None and token == _manifest(session).get("token"):
        return
    if token is not None:
        client.remove_volume(name)
    (session.sandbox / MANIFEST).unlink(missing_ok=True)
    import uuid

    token = uuid.uuid4().hex
    client.create_volume(name, {**labels, TOKEN_LABEL: token})
    write_json_atomic(session.sandbox / MANIFEST, {"token": token, "entries": {}})


def _volume_token(client: ContainerClient, name: str) -> str | None:
    argv = [client.path(), "volume", "inspect", "--format",
            "{{index .Labels \"" + TOKEN_LABEL + "\"}}", name]
    try:
        return client.run(argv, timeout=30).strip()
    except ContainerCommandError:
        return None


def _manifest(session: Session) -> dict[str, object]:
    try:
        found = json.loads((session.sandbox / MANIFEST).read_text())
        return found if isinstance(found, dict) else {}
    except (OSError, ValueError):
        return {}


def hidden_within(config: Config, project: Path) -> frozenset[str]:
    """The hidden paths (:mod:`manager.hide`) inside ``project``, relative to it: never sent
    (a mask over them inside would not keep their content off the engine's disk)."""
    from manager import hide

    real = os.path.realpath(project)
    return frozenset(os.path.relpath(t.path, real) for t in hide.targets(config, str(project))
                     if hide.within(t.path, real) and t.path != real)


def scan(project: Path, hidden: frozenset[str] = frozenset()) -> dict[str, list[int]]:
    """{relative path: [mtime ns, size, mode]} of the project's entries ("." its root),
    none within ``hidden`` (relative paths)."""
    found: dict[str, list[int]] = {}
    for dirpath, dirnames, filenames in os.walk(project):
        if hidden:
            rel_dir = os.path.relpath(dirpath, project)
            dirnames[:] = [d for d in dirnames if os.path.normpath(os.path.join(rel_dir, d))
                           not in hidden]
            filenames = [f for f in filenames if os.path.normpath(os.path.join(rel_dir, f))
                         not in hidden]
        for name in [".", *dirnames, *filenames] if dirpath == str(project) else \
                [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode):
                rel = os.path.normpath(os.path.relpath(path, project))
                found[rel] = [st.st_mtime_ns, st.st_size if not stat.S_ISDIR(st.st_mode) else 0,
                              st.st_mode]
    return found


def sync_lower(client: ContainerClient, session: Session, config: Config) -> dict[str, float]:
    """Send what changed in the project since the last sync into its volume (mounted
    read-write at LOWER_MOUNT in the session's fresh container), hidden paths never (a
    path hidden since the last sync is removed there); record the stats."""
    started = time.monotonic()
    manifest = _manifest(session)
    old = manifest.get("entries")
    old = old if isinstance(old, dict) else {}
    current = scan(session.project_path, hidden_within(config, session.project_path))
    changed = sorted(rel for rel, entry in current.items() if old.get(rel) != entry)
    deleted = sorted(rel for rel in old if rel not in current)
    # Until it finishes, the volume matches no manifest: a failed sync starts afresh next time.
    (session.sandbox / MANIFEST).unlink(missing_ok=True)
    container = container_of(session)
    sent = {"bytes": 0}
    try:
        if deleted:
            payload = b"".join(os.fsencode(rel) + b"\0" for rel in deleted)
            client.exec_feeding(container, ["sh", "-c", f"cd {LOWER_MOUNT} && xargs -0 -r "
                                            "rm -rf --"], lambda pipe: _write(pipe, payload))
        if changed:
            client.exec_feeding(container, ["tar", "-C", LOWER_MOUNT, "--numeric-owner",
                                            "-xpf", "-"],
                                lambda pipe: sent.update(bytes=_pack(session.project_path,
                                                                     changed, pipe)) or None)
    except ContainerCommandError as exc:
        raise EngineUnavailable(f"could not send the project of session {session.id} to the "
                                f"engine: {exc.last_line()}",
                                hint="check the engine (`workspace doctor`); the next call "
                                     "sends the whole project again") from exc
    write_json_atomic(session.sandbox / MANIFEST, {**manifest, "entries": current})
    stats = {"entries": len(current), "sent": len(changed), "deleted": len(deleted),
             "bytes": sent["bytes"], "seconds": round(time.monotonic() - started, 3),
             "full": not old}
    write_json_atomic(session.sandbox / SYNC_STATS, stats)
    return stats


def _write(pipe: IO[bytes], payload: bytes) -> None:
    pipe.write(payload)


def _pack(project: Path, names: list[str], stream: IO[bytes]) -> int:
    """``names`` (relative, parents first) as a tar stream; hard links as their own copies
    (the other name may not be sent). Returns the bytes of file content sent."""
    import tarfile

    total = 0
    with tarfile.open(fileobj=stream, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for rel in names:
            path = project / rel
            try:
                info = tar.gettarinfo(str(path), arcname=rel)
            except OSError:
                continue   # gone since the scan: the next sync sees it
            if info.islnk():
                info.type, info.linkname, info.size = tarfile.REGTYPE, "", path.lstat().st_size
            if info.isreg():
                with open(path, "rb") as f:
                    tar.addfile(info, f)
                total += info.size
            else:
                tar.addfile(info)
    return total


# -- doctor, gc ---------------------------------------------------------------------


def latency(cli: str, rounds: int = 3) -> float:
    """The engine's round trip in seconds (best of ``rounds`` of its cheapest request)."""
    argv = [cli, "version", "--format", "{{.Server.Version}}"]
    best = float("inf")
    for _ in range(rounds):
        began = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, timeout=30, check=False)
        if proc.returncode != 0:
            raise EngineUnavailable(proc.stderr.decode(errors="replace").strip())
        best = min(best, time.monotonic() - began)
    return best


def orphan_volumes(client: ContainerClient, engine: str, containers: list[Labelled],
                   state_label: str, state: str) -> list[Labelled]:
    """This state directory's volumes whose session has no container (id ""), for gc."""
    if not shutil.which(client.cli):
        return []
    argv = [client.cli, "volume", "ls", "--filter", f"label={state_label}={state}",
            "--format", "{{.Name}}"]
    try:
        names = client.run(argv, timeout=30).split()
    except (ContainerCommandError, subprocess.TimeoutExpired):
        return []
    held = {found.session for found in containers}
    sessions = {session for session in (session_of(name, state) for name in names) if session}
    return [Labelled(engine, "", f"volumes of {session}", session)
            for session in sorted(sessions - held)]


def check(cli: str, config: Config) -> Check:
    """doctor: which engine, where, and its round trip."""
    where = location(cli, config)
    try:
        seconds = latency(cli)
    except (EngineUnavailable, subprocess.TimeoutExpired) as exc:
        return Check("engine location", False, f"{where.describe()}: {exc}",
                     "check the host, context or connection named (container.host, "
                     "DOCKER_HOST, DOCKER_CONTEXT, CONTAINER_HOST)")
    kind = "remote: the project is sent in, changes streamed back" if where.remote else "local"
    return Check("engine location", True,
                 f"{cli} at {where.describe()} ({kind}); round trip {seconds * 1000:.0f} ms")
