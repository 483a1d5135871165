"""A Bash call right after a file in the project was saved outside the sandbox.

Claude Code's Write and Edit tools (and most editors) save by renaming a new file over the
old one; overlayfs would keep showing the old one, so the overlay engine must show the
change before the next call. Measured on a warm session of the built-in overlay engine,
median of N calls each, in the same run:
  entry, nothing changed        the lean entry (what the plugin emits per Bash call)
  entry after an outside save   the same call right after an atomic save in the project
The difference is what an edit costs the next call (a fresh holder took ~0.5 s).
Usage: python bench/outside_change_bench.py [-n 15]
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

from run_bench import ENTRY_ARGV


def timed(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True)
    return (time.perf_counter() - start) * 1000


def save(project: Path, i: int) -> None:
    new = project / f".f.{i}.tmp"
    new.write_text(f"version {i}\n")
    os.replace(new, project / "f")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=15)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ws-bench-"))
    env = dict(os.environ, XDG_STATE_HOME=str(tmp / "state"), WORKSPACE_ENGINE="overlay")
    project = tmp / "project"
    project.mkdir()
    cwd = str(project)
    ws = [sys.executable, "-m", "manager"]
    try:
        subprocess.run([*ws, "run", "--", "true"], env=env, cwd=cwd, check=True)  # warm
        entry = subprocess.run([sys.executable, "-c", ENTRY_ARGV], env=env, cwd=cwd,
                               capture_output=True, text=True, check=True).stdout.split("\0")[:-1]
        same, changed = [], []
        for i in range(args.n):   # interleaved: both see the same load
            same.append(timed(entry, env, cwd))
            save(project, i)
            changed.append(timed(entry, env, cwd))
        calm, after = statistics.median(same), statistics.median(changed)
        print(f"{'call':<30}{'median ms':>10}")
        print(f"{'entry, nothing changed':<30}{calm:>10.2f}")
        print(f"{'entry after an outside save':<30}{after:>10.2f}")
        print(f"\nan outside save costs the next call {after - calm:+.2f} ms ({after / calm:.2f}x)")
    finally:
        subprocess.run([*ws, "discard", "--yes"], env=env, cwd=cwd, capture_output=True)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
