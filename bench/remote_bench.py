#!/usr/bin/env python3
"""Sessions on a remote docker engine against the local one (issue 26), in one run.

    .venv/bin/python bench/remote_bench.py --remote unix:///tmp/wsrd.X/docker.sock \\
        [-n 20] [--files 2000] [--sessions 20] [--calls 10]

The remote engine: any DOCKER_HOST URL (tests/engines/remote_dockerd.sh starts one that
shares no path with this host). For the local docker (host mode) and the remote one:

- per call: the median wall time (ms) of the lean path (container_enter.sh, `true`) in a
  warm session;
- first sync (remote only): a project of ``--files`` 4 KiB files sent into a fresh session
  (the first call, container start included, and the sync alone), then the sync after ten
  files changed (the next container's start sends only those);
- many sessions: ``--sessions`` sessions, each its own container, started together; then
  ``--calls`` calls in each, all interleaved from one thread per session; calls/s, the
  containers' memory (``docker stats``), and a check that every session holds exactly its own
  writes (no lost write, no cross-talk).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from manager import config  # noqa: E402
from manager.engines import registry  # noqa: E402
from manager.engines.base import RunRequest  # noqa: E402
from manager.engines.container.base import resource_name  # noqa: E402
from manager.session import store  # noqa: E402

CLI = [sys.executable, "-m", "manager"]


@contextlib.contextmanager
def target(remote: str | None, root: Path) -> Iterator[dict[str, str]]:
    """The environment of one engine (the process's own is restored after: the engine's
    construction points DOCKER_HOST at the setting's engine)."""
    saved = dict(os.environ)
    env = dict(os.environ, XDG_STATE_HOME=str(root / "state"), WORKSPACE_ENGINE="docker")
    env.pop("DOCKER_HOST", None)
    if remote:
        env["WORKSPACE_CONTAINER__HOST"] = remote
    os.environ.clear()
    os.environ.update(env)
    try:
        yield env
    finally:
        os.environ.clear()
        os.environ.update(saved)


def project(root: Path, name: str, files: int = 1) -> Path:
    path = root / name
    (path / "src").mkdir(parents=True)
    for n in range(files):
        (path / "src" / f"f{n:05}.txt").write_bytes(os.urandom(2048).hex().encode())
    return path


def start(path: Path, env: dict[str, str]) -> store.Session:
    subprocess.run([*CLI, "run", "--", "true"], cwd=path, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    session = store.current(path.resolve())
    assert session is not None
    return session


def lean(session: store.Session, path: Path, command: str) -> list[str]:
    engine = registry.make("docker", config.load(path))
    return engine.entry_argv(session, RunRequest(command, str(path)))


def per_call_ms(path: Path, env: dict[str, str], n: int) -> float:
    argv = lean(start(path, env), path, "true")
    times = []
    for _ in range(n + 1):
        began = time.perf_counter()
        subprocess.run(argv, cwd=path, env=env, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - began) * 1000)
    return statistics.median(times[1:])


def first_sync(root: Path, env: dict[str, str], files: int) -> dict[str, float]:
    path = project(root, "big", files)
    began = time.perf_counter()
    session = start(path, env)
    first_call = time.perf_counter() - began
    full = json.loads((session.sandbox / "lower.sync.json").read_text())
    registry.make("docker", config.load(path)).release(session)
    for n in range(10):
        (path / "src" / f"f{n:05}.txt").write_text("changed\n")
    start(path, env)
    again = json.loads((session.sandbox / "lower.sync.json").read_text())
    size = sum(f.stat().st_size for f in (path / "src").iterdir())
    return {"files": files, "mb": round(size / 1e6, 1), "first call s": round(first_call, 2),
            "full sync s": full["seconds"], "after 10 changed: sync s": again["seconds"],
            "after 10 changed: sent": again["sent"]}


def many(root: Path, env: dict[str, str], sessions: int, calls: int) -> dict[str, float]:
    paths = [project(root, f"p{i:02}") for i in range(sessions)]
    began = time.perf_counter()
    with ThreadPoolExecutor(sessions) as pool:
        started = list(pool.map(lambda p: start(p, env), paths))
    setup = time.perf_counter() - began

    def work(i: int) -> None:
        for k in range(calls):
            argv = lean(started[i], paths[i], f"echo s{i}-c{k} >> log.txt")
            subprocess.run(argv, cwd=paths[i], env=env, check=True)

    began = time.perf_counter()
    with ThreadPoolExecutor(sessions) as pool:
        list(pool.map(work, range(sessions)))
    wall = time.perf_counter() - began
    memory = container_memory(env, started)
    for i, path in enumerate(paths):   # status exports each one's upper: its own writes only
        subprocess.run([*CLI, "status"], cwd=path, env=env, check=True, stdout=subprocess.DEVNULL)
        lines = (started[i].sandbox / "upper/log.txt").read_text().split()
        assert lines == [f"s{i}-c{k}" for k in range(calls)], (i, lines)
    for session in started:
        registry.make("docker", config.load(session.project_path)).destroy(session)
    return {"sessions": sessions, "calls": sessions * calls, "start all s": round(setup, 1),
            "calls/s": round(sessions * calls / wall, 1), "containers MiB": memory}


def container_memory(env: dict[str, str], sessions: list[store.Session]) -> float:
    names = [resource_name(s.id) for s in sessions]
    if env.get("WORKSPACE_CONTAINER__HOST"):   # the CLI asked directly: name its engine
        env = dict(env, DOCKER_HOST=env["WORKSPACE_CONTAINER__HOST"])
    out = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", *names],
                         env=env, capture_output=True, text=True, check=False).stdout
    units = {"KiB": 1 / 1024, "MiB": 1.0, "GiB": 1024.0, "B": 1 / 2**20}
    total = 0.0
    for line in out.splitlines():
        used = line.split("/")[0].strip()
        for unit, scale in units.items():
            if used.endswith(unit):
                total += float(used.removesuffix(unit)) * scale
                break
    return round(total, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--remote", required=True, help="the remote engine's DOCKER_HOST URL")
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--sessions", type=int, default=20)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--remote-only", action="store_true")
    args = ap.parse_args()
    results: dict[str, object] = {}
    for label, url in (("local", None), ("remote", args.remote))[1 if args.remote_only else 0:]:
        root = Path(tempfile.mkdtemp(prefix=f"ws-rbench-{label}-"))
        try:
            with target(url, root) as env:
                results[f"{label}: per call ms (lean path)"] = round(
                    per_call_ms(project(root, "one"), env, args.n), 1)
                if url:
                    results[f"{label}: first sync"] = first_sync(root, env, args.files)
                results[f"{label}: many sessions"] = many(root, env, args.sessions, args.calls)
                with contextlib.suppress(Exception):
                    for session in store.list_sessions()[0]:
                        registry.make("docker", config.load(None)).destroy(session)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    for key, value in results.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
