"""What a command sees inside each engine equals what it sees natively, but for the listed exceptions.

One probe script (``probe.sh``) runs natively and in an engine, as the same user, in the
same cwd and environment, around the same outside changes; its observations are compared
line by line. Every difference must be listed in ``expected.EXPECTED`` with its reason and
the section of docs/fidelity.md that documents it, and every listed difference must still
occur (so the table stays true).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance import expected

pytestmark = pytest.mark.as_user

PROBE = (Path(__file__).with_name("probe.sh")).read_text()
FILES = ("old", "changed", "replaced")   # made before the session starts
PLACES = ("project", "home", "tmp", "var_tmp")


class Side:
    """One side of the comparison: a project and files outside it, all named by ``tag``."""

    def __init__(self, root: Path, name: str, sandboxed: bool) -> None:
        self.tag = f"wsconf{uuid.uuid4().hex[:8]}{name}"
        self.sandboxed = sandboxed
        self.project = root / self.tag
        self.places = {"project": self.project, "home": Path(os.environ["HOME"]),
                       "tmp": Path("/tmp"), "var_tmp": Path("/var/tmp")}
        self.extra = [Path(f"/dev/shm/{self.tag}-old.txt"), Path(f"/tmp/{self.tag}-sock"),
                      Path(f"/tmp/{self.tag}-stale")]

    def stage(self) -> None:
        self.project.mkdir()
        git = ["git", "-c", "user.name=t", "-c", "user.email=t@t.invalid"]
        subprocess.run([*git, "init", "-q"], cwd=self.project, check=True)
        (self.project / "tracked.txt").write_text("committed\n")
        subprocess.run([*git, "add", "tracked.txt"], cwd=self.project, check=True)
        subprocess.run([*git, "commit", "-qm", "c"], cwd=self.project, check=True)
        for place in self.places.values():
            for name in FILES:
                (place / f"{self.tag}-{name}.txt").write_text("before\n")
        self.extra[0].write_text("before\n")
        with socket.socket(socket.AF_UNIX) as stale:   # a daemon that died without cleaning up
            stale.bind(str(self.extra[2]))

    def change_outside(self) -> None:
        for place in self.places.values():
            (place / f"{self.tag}-new.txt").write_text("new outside\n")
            with open(place / f"{self.tag}-changed.txt", "a") as f:
                f.write("changed outside\n")
            fresh = place / f"{self.tag}-replaced.tmp"
            fresh.write_text("replaced outside\n")
            fresh.replace(place / f"{self.tag}-replaced.txt")

    def call(self, phase: str) -> str:
        argv = ["bash", "-c", PROBE, "probe", phase, self.tag]
        if self.sandboxed:
            argv = [sys.executable, "-m", "manager", "run", "--", *argv]
        proc = subprocess.run(argv, cwd=self.project, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{phase} ({'sandbox' if self.sandboxed else 'native'}) " \
                                     f"exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        return proc.stdout.replace(self.tag, "TAG")

    def cleanup(self) -> None:
        for place in self.places.values():
            if place != self.project:
                for made in place.glob(f"{self.tag}-*"):
                    made.unlink(missing_ok=True)
        for path in self.extra:
            path.unlink(missing_ok=True)
        subprocess.run(["pkill", "-f", f"^{self.tag}-"], capture_output=True)


def observations(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        found[key] = value
    return found


@pytest.fixture
def sides(tmp_path: Path) -> Iterator[tuple[Side, Side]]:
    native, sandbox = Side(tmp_path, "n", False), Side(tmp_path, "s", True)
    servers = []
    try:
        for side in (native, sandbox):
            side.stage()
            server = socket.socket(socket.AF_UNIX)
            server.bind(str(side.extra[1]))
            server.listen(8)
            servers.append(server)
            servers.append(subprocess.Popen(["bash", "-c", f'exec -a "{side.tag}-host" sleep 120']))
        yield native, sandbox
    finally:
        for held in servers:
            if isinstance(held, socket.socket):
                held.close()
            else:
                held.kill()
                held.wait()
        native.cleanup()
        sandbox.cleanup()


def observe(native: Side, sandbox: Side) -> tuple[dict[str, str], dict[str, str]]:
    for side in (native, sandbox):
        side.call("start")
    for side in (native, sandbox):
        side.change_outside()
    for side in (native, sandbox):
        side.call("change")
    return observations(native.call("observe")), observations(sandbox.call("observe"))


def differences(native: dict[str, str], inside: dict[str, str]) -> dict[str, tuple[str, str]]:
    return {key: (native.get(key, "<absent>"), inside.get(key, "<absent>"))
            for key in sorted(native.keys() | inside.keys()) if native.get(key) != inside.get(key)}


def test_inside_equals_native_but_for_documented_exceptions(conformance_engine: str,
                                                             sides: tuple[Side, Side]):
    native, inside = observe(*sides)
    found = differences(native, inside)
    table = expected.for_engine(conformance_engine, os.getuid() == 0)
    unexpected = {k: v for k, v in found.items() if expected.reason(table, k) is None}
    stale = [pattern for pattern in table if not any(expected.matches(pattern, k) for k in found)]
    report = "\n".join(f"  {k}: native {n!r}, inside {i!r}" for k, (n, i) in found.items())
    assert not unexpected and not stale, (
        f"{conformance_engine} as {'root' if os.getuid() == 0 else 'user'}:\n"
        f"unexpected differences: {sorted(unexpected)}\n"
        f"listed but no longer different: {stale}\nall differences:\n{report}")


def test_every_listed_difference_has_a_documented_reason():
    docs = (Path(__file__).parents[2] / "docs/fidelity.md").read_text()
    for (engine, who), table in expected.EXPECTED.items():
        for key, (why, section) in table.items():
            assert why and f'<a id="{section}"></a>' in docs, (engine, who, key, section)
