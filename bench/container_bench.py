#!/usr/bin/env python3
"""Per-call cost of the podman and docker engines against the bare engine, in one run.

    .venv/bin/python bench/container_bench.py [-n 30] [--engine docker --engine podman]

For each engine, a warm session (its container already running) in a throwaway
project and state directory, then the median wall time (ms) of one trivial
command (`true`) through:

- our lean path: `container/enter.sh` (what the Claude plugin runs per Bash call)
- `workspace run -- true` (the CLI: Python start-up + the lean path)
- a bare `ENGINE exec CTR true` into the same container (the target: lean path within 15 ms)
- `ENGINE run --rm IMAGE true`
- docker only: the docker SDK over the API socket (exec_create + exec_start + exec_inspect)
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from manager import config  # noqa: E402
from manager.engines import registry  # noqa: E402
from manager.engines.base import RunRequest  # noqa: E402
from manager.session import store  # noqa: E402


def interleaved_ms(paths: dict[str, Callable[[], object]],
                   n: int) -> dict[str, tuple[float, float]]:
    """(median, min) per path; rounds alternate the paths so machine noise hits all alike."""
    times: dict[str, list[float]] = {label: [] for label in paths}
    for fn in paths.values():
        fn()  # warm-up
    for _ in range(n):
        for label, fn in paths.items():
            t = time.perf_counter()
            fn()
            times[label].append((time.perf_counter() - t) * 1000)
    return {label: (statistics.median(xs), min(xs)) for label, xs in times.items()}


def call(argv: list[str], **kw: object) -> None:
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]


def sdk_exec(ctr: str) -> Callable[[], None]:
    import docker

    api = docker.from_env().api

    def run() -> None:
        exec_id = api.exec_create(ctr, ["true"])["Id"]
        api.exec_start(exec_id)
        assert api.exec_inspect(exec_id)["ExitCode"] == 0

    return run


def _has_sdk() -> bool:
    """The docker SDK is a test extra, for this comparison only."""
    import importlib.util

    return importlib.util.find_spec("docker") is not None


def bench_engine(name: str, n: int, rows: list[tuple[str, str, str]]) -> None:
    project = Path(tempfile.mkdtemp(prefix="ws-bench-proj-"))
    env = dict(os.environ, XDG_STATE_HOME=str(project.parent / f"{project.name}-state"),
               WORKSPACE_ENGINE=name)
    os.environ.update(env)
    cli = [sys.executable, "-m", "manager"]
    call([*cli, "run", "--", "true"], cwd=project, env=env)  # creates the session's container
    session = store.current(project.resolve())
    assert session is not None
    engine = registry.make(name, config.load(project))
    ctr = engine.container_name(session)
    image = engine.config["container.image"]
    lean = engine.entry_argv(session, RunRequest("true", str(project)))

    paths: dict[str, Callable[[], object]] = {
        "bare `exec CTR true` (CLI)": lambda: call([name, "exec", ctr, "true"]),
        "our lean path (container/enter.sh)": lambda: call(lean, cwd=project, env=env),
        "`workspace run -- true`": lambda: call([*cli, "run", "--", "true"], cwd=project, env=env),
        "`run --rm IMAGE true`": lambda: call([name, "run", "--rm", "--network", "none", image,
                                               "true"]),
    }
    if name == "docker" and _has_sdk():
        paths["docker SDK exec over the API socket"] = sdk_exec(ctr)
    try:
        for label, (med, low) in interleaved_ms(paths, n).items():
            rows.append((f"{name}: {label}", f"{med:7.1f}", f"{low:7.1f}"))
    finally:
        engine.destroy(session)
        shutil.rmtree(project, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--engine", action="append", choices=("docker", "podman"))
    args = ap.parse_args()
    rows: list[tuple[str, str, str]] = []
    med, low = interleaved_ms({"": lambda: call(["bash", "-c", "true"])}, args.n)[""]
    rows.append(("baseline: bash -c true", f"{med:7.1f}", f"{low:7.1f}"))
    for name in args.engine or ["docker", "podman"]:
        if shutil.which(name) is None:
            rows.append((f"{name}: *", "skipped", "not installed"))
            continue
        bench_engine(name, args.n, rows)
    width = max(len(r[0]) for r in rows)
    print(f"{'path':<{width}}  median ms  min ms   (n={args.n})")
    for label, med_s, low_s in rows:
        print(f"{label:<{width}}  {med_s:>9}  {low_s:>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
