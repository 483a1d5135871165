"""Sessions on a remote engine (issue 26): nothing of this host is shared with it.

Against a second dockerd in its own namespaces and against the ordinary account's rootless
podman API service (see remote_support), each reached through a proxy socket that a test can
cut mid-stream. A session is one container there; the project goes in through the socket
and the changes come back the same way.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from manager import config
from manager.engines import registry
from manager.engines.base import RunRequest
from manager.session import paths
from manager.session import store
from tests.conftest import Runner
from tests.engines.remote_support import CuttingProxy
from tests.engines.remote_support import podman_service
from tests.engines.remote_support import second_dockerd
from tests.engines.support import status

pytestmark = [pytest.mark.engine]
VARIABLE = {"docker": "DOCKER_HOST", "podman": "CONTAINER_HOST"}


@dataclass
class Remote:
    cli: str
    url: str          # the engine's own socket
    proxy: CuttingProxy

    def engine(self, *argv: str) -> str:
        env = dict(os.environ, **{VARIABLE[self.cli]: self.url})
        return subprocess.run([self.cli, *argv], env=env, capture_output=True, text=True,
                              check=True, timeout=60).stdout

    def ours(self) -> tuple[list[str], list[str]]:
        """This test's containers and volumes on the engine (by the state dir's label)."""
        label = f"label=org.workspace.state={paths.state_home()}"
        return (self.engine("ps", "-aq", "--filter", label).split(),
                self.engine("volume", "ls", "-q", "--filter", label).split())


@pytest.fixture(scope="session")
def remote_docker_url() -> Iterator[str]:
    with second_dockerd() as url:
        yield url


@pytest.fixture(scope="session")
def remote_podman_url() -> Iterator[str]:
    with podman_service() as url:
        yield url


@pytest.fixture(params=["docker", "podman"])
def remote(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Remote]:
    cli = request.param
    url = request.getfixturevalue(f"remote_{cli}_url")
    folder = tempfile.mkdtemp(prefix="wsproxy.", dir="/tmp")
    proxy = CuttingProxy(url.removeprefix("unix://"), f"{folder}/engine.sock")
    for variable in ("DOCKER_HOST", "DOCKER_CONTEXT", "CONTAINER_HOST", "CONTAINER_CONNECTION"):
        # An engine made in this process sets one (remote.connect): set first, so that the
        # teardown restores the variable's absence (a delenv of an absent one records nothing).
        monkeypatch.setenv(variable, "")
        monkeypatch.delenv(variable)
    monkeypatch.setenv("WORKSPACE_ENGINE", cli)
    monkeypatch.setenv("WORKSPACE_CONTAINER__HOST", f"unix://{proxy.path}")
    found = Remote(cli, url, proxy)
    yield found
    proxy.close()
    shutil.rmtree(folder, ignore_errors=True)
    containers, volumes = found.ours()
    if containers:
        found.engine("rm", "-f", "-v", *containers)
    if volumes:
        found.engine("volume", "rm", "-f", *volumes)


def session_of(project: Path) -> store.Session:
    session = store.current(project)
    assert session is not None
    return session


def test_run_review_commit_discard(remote: Remote, ws: Runner, project: Path, tmp_path: Path):
    (project / "src").mkdir()
    for n in range(20):
        (project / "src" / f"f{n}.txt").write_text(f"{n}\n")
    script = ("echo hi > new.txt && echo more >> README.txt && rm src/f0.txt && "
              f"echo $(ls -A {tmp_path}) / $(ls -A {tmp_path}/home) && cat src/f7.txt")
    # The engine sees the project (sent in), nothing else of this host's: not the test's
    # state or sandbox beside it; $HOME is an empty one made in the container.
    assert ws("run", "-c", script, check=True).stdout == "home proj /\n7\n"
    assert not (project / "new.txt").exists()
    assert status(ws) == {str(project / "new.txt"): "added",
                          str(project / "README.txt"): "modified",
                          str(project / "src/f0.txt"): "deleted"}
    assert "+hi" in ws("diff", check=True).stdout
    ws("commit", str(project / "new.txt"), str(project / "README.txt"), check=True)
    assert (project / "README.txt").read_text() == "hello\nmore\n"
    assert status(ws) == {str(project / "src/f0.txt"): "deleted"}
    ws("discard", "--yes", check=True)
    assert status(ws) == {}
    assert (project / "src/f0.txt").read_text() == "0\n"
    # The next container sees the committed files and a file removed on the host meanwhile:
    # only what changed was sent again.
    (project / "src/f1.txt").unlink()
    out = ws("run", "-c", "cat new.txt src/f0.txt; test ! -e src/f1.txt && echo gone",
             check=True).stdout
    assert out == "hi\n0\ngone\n"
    sync = json.loads((session_of(project).sandbox / "lower.sync.json").read_text())
    assert not sync["full"] and 0 < sync["sent"] < sync["entries"] / 2 and sync["deleted"] == 1
    rows = json.loads(ws("sessions", "--json", check=True).stdout)["sessions"]
    assert [row["where"] for row in rows] == [f"unix://{remote.proxy.path}"]


def test_lean_entry_and_conflict(remote: Remote, ws: Runner, project: Path):
    ws("run", "-c", "echo sandbox > README.txt", check=True)
    # The plugin runs the entry script in the agent's shell, which names no engine: the
    # session's sandbox says where its engine is.
    engine = registry.make(remote.cli, config.load(project))
    argv = engine.entry_argv(session_of(project), RunRequest("echo lean > lean.txt; pwd",
                                                             str(project)))
    bare = {"PATH": os.environ["PATH"], "HOME": os.environ["HOME"]}
    proc = subprocess.run(argv, env=bare, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (0, f"{project}\n"), proc.stderr
    assert status(ws) == {str(project / "README.txt"): "modified",
                          str(project / "lean.txt"): "added"}
    (project / "README.txt").write_text("host\n")
    proc = ws("commit")
    assert proc.returncode != 0 and "conflict" in (proc.stdout + proc.stderr).lower()
    assert (project / "README.txt").read_text() == "host\n"


def test_connection_cut_mid_commit_applies_nothing_then_gc(remote: Remote, ws: Runner, project: Path):
    ws("run", "-c", "head -c 3000000 /dev/urandom > big.bin && echo x > small.txt && "
       "echo more >> README.txt", check=True)
    remote.proxy.cut_after = 1_000_000   # the export's tar stream dies a third of the way
    proc = ws("commit")
    assert proc.returncode == 1, proc.stdout   # a clear error, not a crash (exit 3)
    assert "ended early" in proc.stderr or "could not export" in proc.stderr, proc.stderr
    assert remote.proxy.cuts >= 1
    assert sorted(p.name for p in project.iterdir()) == ["README.txt"]
    assert (project / "README.txt").read_text() == "hello\n"
    remote.proxy.cut_after = None   # the network is back: the changes are all still there
    assert len(status(ws)) == 3
    ws("commit", check=True)
    assert (project / "big.bin").stat().st_size == 3000000
    assert (project / "small.txt").read_text() == "x\n"
    # The container went with the commit; the project's copy stays for the next one. When the
    # session's record is lost (not destroyed), gc finds that copy on the engine all the same.
    assert remote.ours()[0] == [] and len(remote.ours()[1]) == 1
    shutil.rmtree(session_of(project).dir)
    ws("gc", check=True)
    assert remote.ours() == ([], [])


def test_doctor_names_the_remote_engine(remote_docker_url: str,
                                        monkeypatch: pytest.MonkeyPatch):
    from manager import config
    from manager.engines.container import remote as container_remote

    monkeypatch.setenv("DOCKER_HOST", remote_docker_url)   # the engine's own variable
    check = container_remote.check("docker", config.load(None))
    assert check.ok and remote_docker_url in check.detail and "remote" in check.detail
    assert "round trip" in check.detail
