"""The docker or podman CLI as one client: argv built here, failures raised typed.

Modelled on python-on-whales: each operation builds its command line and runs
the engine's binary; a failure raises :class:`ContainerCommandError` carrying the
command, its exit status and its output. Creating a container goes through
python-on-whales itself (its ``run`` options are the engines' vocabulary); it is
imported only then, since it costs ~150-200 ms, and its errors come out as the
same typed error. Nothing here is on the per-call path but :meth:`ContainerClient.path`.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Callable
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO
from typing import TYPE_CHECKING
from typing import Any
from typing import TypeVar

from manager.errors import EngineUnavailable

if TYPE_CHECKING:
    from python_on_whales import DockerClient

T = TypeVar("T")
TIMEOUT = 120.0
NO_SUCH_CONTAINER = "no such container"


class ContainerCommandError(EngineUnavailable):
    """The engine's CLI failed: the command, its exit status and what it printed."""

    def __init__(self, command: list[str], returncode: int, stdout: str = "",
                 stderr: str = "") -> None:
        self.command = command
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        super().__init__(f"`{' '.join(command[:3])} ...` exited {returncode}: {self.last_line()}")

    def last_line(self) -> str:
        """The engine's own reason: the last line it printed on stderr."""
        text = self.stderr.strip()
        return text.splitlines()[-1] if text else f"exit status {self.returncode}"

    @property
    def no_such_container(self) -> bool:
        return NO_SUCH_CONTAINER in self.stderr.lower()


@dataclass(frozen=True)
class Started:
    """A container just started: its init's pid on the host (0: not visible) and the limits
    the engine recorded (0: none)."""

    id: str
    pid: int
    memory: int
    pids_limit: int
    nano_cpus: int


@dataclass(frozen=True)
class Labelled:
    """A container some session of this state directory made."""

    engine: str
    id: str
    name: str
    session: str


class ContainerClient:
    """One engine's CLI (``docker`` or ``podman``)."""

    def __init__(self, cli: str) -> None:
        self.cli = cli

    def path(self) -> str:
        return shutil.which(self.cli) or self.cli

    # -- raw commands -----------------------------------------------------------

    def answer(self, args: list[str], timeout: float = TIMEOUT) -> tuple[int, str]:
        """(exit status, the last line of stderr or of stdout) of ``CLI ARGS``, never raising:
        a missing binary (127) or a hang (124) is an answer too (the doctor's checks)."""
        argv = [self.cli, *args]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            return 127, f"{self.cli} not found"
        except subprocess.TimeoutExpired:
            return 124, f"`{' '.join(argv[:3])}` did not answer within {timeout:.0f} s"
        text = proc.stderr.strip() if proc.returncode else proc.stdout.strip()
        return proc.returncode, text.splitlines()[-1] if text else ""

    def output(self, args: list[str], timeout: float = TIMEOUT) -> str:
        """The stdout of ``CLI ARGS`` whatever its status; empty when it cannot run."""
        try:
            return subprocess.run([self.cli, *args], capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL).stdout
        except (OSError, subprocess.SubprocessError):
            return ""

    def has_image(self, image: str, timeout: float = 60) -> bool:
        """``image inspect`` through the CLI (no python-on-whales import)."""
        return subprocess.run([self.cli, "image", "inspect", image], capture_output=True,
                              stdin=subprocess.DEVNULL, timeout=timeout).returncode == 0

    def image_names(self, image: str, timeout: float = 60) -> list[str] | None:
        """The names (repo tags) of the image ``image`` resolves to; None when there is none."""
        import json

        proc = subprocess.run([self.cli, "image", "inspect", "--format", "{{json .RepoTags}}", image],
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout)
        if proc.returncode != 0:
            return None
        try:
            names = json.loads(proc.stdout.strip().splitlines()[0])
        except (ValueError, IndexError):
            return []
        return [str(n) for n in names] if isinstance(names, list) else []

    def build(self, args: list[str], env: dict[str, str],
              timeout: float) -> subprocess.CompletedProcess[str]:
        """``CLI build ARGS``, its output captured."""
        return subprocess.run([self.cli, "build", *args], capture_output=True, text=True, env=env,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def run(self, argv: list[str], timeout: float = TIMEOUT) -> str:
        """Run ``argv`` (a whole command line), return its stdout; raise on failure."""
        proc = subprocess.run(argv, capture_output=True, stdin=subprocess.DEVNULL,
                              timeout=timeout)
        out, err = proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace")
        if proc.returncode != 0:
            raise ContainerCommandError(argv, proc.returncode, out, err)
        return out

    def exec_argv(self, container: str, argv: list[str], stdin: bool = False) -> list[str]:
        """``argv`` run as root in ``container``."""
        return [self.path(), "exec", *(["-i"] if stdin else []), "-u", "0", container, *argv]

    def exec_root(self, container: str, argv: list[str]) -> str:
        return self.run(self.exec_argv(container, argv))

    def exec_feeding(self, container: str, argv: list[str],
                     feed: Callable[[IO[bytes]], None]) -> None:
        """Run ``argv`` as root in ``container`` with ``feed`` writing its stdin."""
        command = self.exec_argv(container, argv, stdin=True)
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        assert proc.stdin is not None and proc.stderr is not None
        try:
            feed(proc.stdin)
        finally:
            proc.stdin.close()
        err = proc.stderr.read()
        if proc.wait() != 0:
            raise ContainerCommandError(command, proc.returncode, "",
                                        err.decode(errors="replace"))

    def exec_reading(self, container: str, argv: list[str],
                     read: Callable[[IO[bytes]], T]) -> T:
        """Run ``argv`` as root in ``container``; ``read`` consumes its stdout."""
        return self.run_reading(self.exec_argv(container, argv), read)

    def run_reading(self, command: list[str], read: Callable[[IO[bytes]], T]) -> T:
        """Run ``command`` (a whole command line); ``read`` consumes its stdout."""
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        assert proc.stdout is not None
        try:
            result = read(proc.stdout)
        finally:
            _, err = proc.communicate()
        if proc.returncode != 0:
            raise ContainerCommandError(command, proc.returncode, "",
                                        err.decode(errors="replace"))
        return result

    # -- containers and volumes by label (gc: no python-on-whales import) --------

    def labelled(self, engine: str, label: str, value: str,
                 session_label: str) -> list[Labelled]:
        """Containers labelled exactly ``label=value``, running or not; none from an engine
        that is missing or does not answer.

        Read in a form no value can forge (a label is anyone's to write, a newline included):
        ``ps -q`` prints ids alone, each checked for its shape, and ``inspect`` prints each
        one's id, name and labels as JSON (:mod:`manager.engines.container.rows`)."""
        if shutil.which(self.cli) is None:
            return []
        from manager.engines.container import rows

        ids = rows.ids(self.output(["ps", "-aq", "--no-trunc", "--filter",
                                    f"label={label}={value}"], timeout=30))
        if not ids:
            return []
        out = self.output(["container", "inspect", "--format", rows.INSPECT_FORMAT, "--",
                           *ids], timeout=30)   # one gone since: the others still print
        return [Labelled(engine, ident, name, str(labels[session_label]))
                for ident, name, labels in rows.parse(out, ids)
                if labels.get(label) == value and isinstance(labels.get(session_label), str)]

    def remove_container(self, ref: str) -> None:
        """Remove a container and its anonymous volumes, running or not; gone is fine."""
        try:
            self.run([self.cli, "rm", "-f", "-v", ref])
        except ContainerCommandError as exc:
            if not exc.no_such_container:
                raise

    def remove_volume_quietly(self, name: str) -> None:
        """Best effort: a volume that is not there (or is in use) stays as it is."""
        with contextlib.suppress(ContainerCommandError):
            self.run([self.cli, "volume", "rm", name])

    # -- python-on-whales ---------------------------------------------------------

    def whales(self) -> DockerClient:
        try:
            from python_on_whales import DockerClient
        except ImportError as exc:
            raise EngineUnavailable(f"python-on-whales is not installed: {exc}",
                                    hint="it is a dependency of workspace: reinstall it "
                                         "(`pip install workspace-sandbox`, or rerun the "
                                         "plugin's bootstrap)") from exc
        return DockerClient(client_call=[self.cli])

    def start(self, image: str, name: str, labels: dict[str, str],
              options: dict[str, Any]) -> Started:
        """``run -d`` with python-on-whales' ``run`` options; the image must be present."""
        client = self.whales()
        with whales_errors():
            container = client.container.run(image, detach=True, name=name,
                                           pull="never", labels=labels, **options)
            host = container.host_config
            return Started(container.id, int(container.state.pid or 0), host.memory or 0,
                           host.pids_limit or 0, host.nano_cpus or 0)

    def remove(self, container: str) -> None:
        """Remove a container (and its overlay's volume record), running or not."""
        client = self.whales()
        from python_on_whales.exceptions import NoSuchContainer

        with whales_errors(), contextlib.suppress(NoSuchContainer):
            client.container.remove(container, force=True, volumes=True)

    def image_exists(self, image: str) -> bool:
        client = self.whales()
        with whales_errors():
            return bool(client.image.exists(image))

    def volume_exists(self, name: str) -> bool:
        client = self.whales()
        with whales_errors():
            return bool(client.volume.exists(name))

    def create_volume(self, name: str, labels: dict[str, str]) -> None:
        client = self.whales()
        with whales_errors():
            client.volume.create(name, labels=labels)

    def remove_volume(self, name: str) -> None:
        """Remove a named volume; gone is fine."""
        client = self.whales()
        from python_on_whales.exceptions import NoSuchVolume

        with whales_errors(), contextlib.suppress(NoSuchVolume):
            client.volume.remove(name)


@contextlib.contextmanager
def whales_errors() -> Iterator[None]:
    """python-on-whales' failures as :class:`ContainerCommandError` (a ``NoSuch*`` a caller
    expects is suppressed inside this)."""
    from python_on_whales.exceptions import DockerException

    try:
        yield
    except DockerException as exc:
        raise ContainerCommandError([str(a) for a in exc.docker_command], exc.return_code,
                                    exc.stdout or "", exc.stderr or "") from exc
