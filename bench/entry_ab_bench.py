"""Per-call cost of the overlay engine's lean entry, two checkouts against each other.

Each checkout gets a warm session of its own; the calls (sandboxed `true`) alternate
between them, so a loaded machine weighs on both alike. Prints the median of each and
the difference (B - A).

Usage: python bench/entry_ab_bench.py CHECKOUT_A CHECKOUT_B [-n 60]
  (a checkout: a directory with manager/ in it, e.g. a `git worktree add --detach` of main)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENTRY_ARGV = """
import os
from manager.session.context import Context
from manager.engines.base import RunRequest
ctx = Context.load()
session = ctx.session()
argv = ctx.engine(session).entry_argv(session, RunRequest(command="true", cwd=os.getcwd()))
print("\\0".join(argv), end="\\0")
"""


def prepare(checkout: str, tmp: Path) -> tuple[list[str], dict[str, str], str]:
    env = dict(os.environ, PYTHONPATH=checkout, XDG_STATE_HOME=str(tmp / "state"),
               WORKSPACE_ENGINE="overlay")
    project = tmp / "project"
    project.mkdir(parents=True)
    ws = [sys.executable, "-m", "manager"]
    subprocess.run([*ws, "run", "--", "true"], env=env, cwd=project, check=True)   # warm
    entry = subprocess.run([sys.executable, "-c", ENTRY_ARGV], env=env, cwd=project,
                           capture_output=True, text=True, check=True).stdout.split("\0")[:-1]
    return entry, env, str(project)


def timed(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return (time.perf_counter() - start) * 1000


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("-n", type=int, default=60)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ws-ab-bench-"))
    sides = {}
    try:
        for name, checkout in (("A", args.a), ("B", args.b)):
            sides[name] = prepare(os.path.abspath(checkout), tmp / name)
        samples: dict[str, list[float]] = {"A": [], "B": []}
        for _ in range(args.n):
            for name, (entry, env, cwd) in sides.items():
                samples[name].append(timed(entry, env, cwd))
        med = {k: statistics.median(v) for k, v in samples.items()}
        print(f"A {args.a}: {med['A']:.2f} ms   B {args.b}: {med['B']:.2f} ms   "
              f"B - A: {med['B'] - med['A']:+.2f} ms (median of {args.n} each)")
    finally:
        for _, env, cwd in sides.values():
            subprocess.run([sys.executable, "-m", "manager", "discard", "--yes"], env=env,
                           cwd=cwd, capture_output=True)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
