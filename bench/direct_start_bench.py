#!/usr/bin/env python3
"""What the direct-attempt helper (container/direct.py) adds to a session container's start.

    .venv/bin/python bench/direct_start_bench.py [-n 5] [--engine docker --engine podman]

For each engine, with ``network`` a list: the median wall time (ms) of the session
container's start (``prepare``: the container, the host proxy, the forwarder's hello) with
the helper, and in the same run, rounds alternating, without it (``begin`` a no-op); then
the ratio. A call's own path is not touched (the entry script reads one more word of
``egress.pid``): container_bench.py measures it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from manager import config  # noqa: E402
from manager.engines import registry  # noqa: E402
from manager.engines.container import direct  # noqa: E402
from manager.session import store  # noqa: E402


def start_ms(name: str, project: Path, helper: bool) -> float:
    cfg = config.load(project)
    cfg.values["network"] = ["example.invalid:443"]
    engine = registry.make(name, cfg)
    session = store.create(project, name, origin="bench")
    real = direct.begin
    if not helper:
        direct.begin = lambda *_: None   # type: ignore[assignment,return-value]
    try:
        t = time.perf_counter()
        engine.prepare(session)
        return (time.perf_counter() - t) * 1000
    finally:
        direct.begin = real   # type: ignore[method-assign]
        engine.destroy(session)
        store.remove(session)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--engine", action="append", choices=("docker", "podman"))
    args = ap.parse_args()
    project = Path(tempfile.mkdtemp(prefix="ws-bench-direct-"))
    os.environ["XDG_STATE_HOME"] = str(project.parent / f"{project.name}-state")
    try:
        print(f"{'engine':<8} {'with helper':>12} {'without':>9} {'ratio':>6}   (median ms, n={args.n})")
        for name in args.engine or ["docker", "podman"]:
            times: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(args.n):
                for helper in (True, False):
                    times[helper].append(start_ms(name, project, helper))
            with_, without = (statistics.median(times[h]) for h in (True, False))
            print(f"{name:<8} {with_:>12.0f} {without:>9.0f} {with_ / without:>6.2f}")
    finally:
        shutil.rmtree(project, ignore_errors=True)
        shutil.rmtree(os.environ["XDG_STATE_HOME"], ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
