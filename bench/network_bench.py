"""Per-call cost of setting ``network``: a sandboxed ``true`` through the lean entry (what
the plugin emits per Bash call) with ``network`` a list, off and open, on the overlay engine
or (``--engine``) podman or docker (a list there: the proxy's pid checked, its variables set).

Each mode has its own warm session; the entries run interleaved (one of each per round, in a random order), so
that the machine's load weighs on all alike. Goal (issue 24): a list costs +2 ms or less
a call over open.
Usage: python bench/network_bench.py [-n 60] [--engine overlay|podman|docker]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MODES = {"open": "open", "off": "off", "list": "pypi,github,127.0.0.2:8080"}
ENTRY_ARGV = """
import os
import random
from manager.session.context import Context
from manager.engines.base import RunRequest
ctx = Context.load()
session = ctx.session()
argv = ctx.engine(session).entry_argv(session, RunRequest(command="true", cwd=os.getcwd()))
print("\\0".join(argv), end="\\0")
"""


def session(tmp: Path, mode: str, engine: str) -> tuple[list[str], dict[str, str], str]:
    env = dict(os.environ, XDG_STATE_HOME=str(tmp / "state"), WORKSPACE_ENGINE=engine,
               WORKSPACE_NETWORK=MODES[mode])
    project = tmp / mode
    project.mkdir()
    ws = [sys.executable, "-m", "manager"]
    subprocess.run([*ws, "run", "--", "true"], env=env, cwd=project, check=True)   # warm
    argv = subprocess.run([sys.executable, "-c", ENTRY_ARGV], env=env, cwd=project,
                          capture_output=True, text=True, check=True).stdout.split("\0")[:-1]
    return argv, env, str(project)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=60)
    parser.add_argument("--engine", default="overlay", choices=("overlay", "podman", "docker"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ws-netbench-"))
    made = {}
    try:
        made = {mode: session(tmp, mode, args.engine) for mode in MODES}
        samples: dict[str, list[float]] = {mode: [] for mode in MODES}
        order = list(made)
        for _ in range(args.n):
            random.shuffle(order)   # no mode always first (or last) in a round
            for mode in order:
                argv, env, cwd = made[mode]
                start = time.perf_counter()
                subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, check=True)
                samples[mode].append(time.perf_counter() - start)
        medians = {mode: statistics.median(s) * 1000 for mode, s in samples.items()}
        print(f"{'network':<10}{'median ms':>10}{'vs open':>10}")
        for mode, ms in medians.items():
            print(f"{mode:<10}{ms:>10.2f}{ms - medians['open']:>+10.2f}")
        extra = medians["list"] - medians["open"]
        print(f"\na list costs {extra:+.2f} ms a call over open (goal: +2 ms or less)")
    finally:
        for _, env, cwd in made.values():
            subprocess.run([sys.executable, "-m", "manager", "discard", "--yes"], env=env, cwd=cwd,
                           capture_output=True)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
