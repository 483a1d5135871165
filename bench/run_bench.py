"""Per-call cost of the built-in overlay engine, against baselines in the same run.

Measures, median of N runs each, on a warm session:
  bash -c true                       the floor
  lean entry                         overlay/enter.sh, what the plugin emits per Bash call
  workspace run -- true              the CLI (interpreter start-up included)
  try -N DIR true (or -D)            binpash/try with a reused DIR, when installed

Targets: lean entry within 10 ms of bash (issue 2); workspace run under half of try (issue 2)
and within 60 ms of bash (issue 23).
Usage: python bench/run_bench.py [-n 30]
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
from pathlib import Path


def median_ms(argv: list[str], n: int, env: dict[str, str], cwd: str) -> float:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=True)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def try_argv(try_bin: str, sandbox: str) -> list[str]:
    usage = subprocess.run([try_bin, "-h"], capture_output=True, text=True).stdout
    usage += subprocess.run([try_bin, "-h"], capture_output=True, text=True).stderr
    flag = "-N" if "-N " in usage or "-N DIR" in usage else "-D"
    return [try_bin, flag, sandbox, "true"]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=30)
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
        rows = [("bash -c true", median_ms(["bash", "-c", "true"], args.n, env, cwd)),
                ("lean entry (overlay/enter.sh)", median_ms(entry, args.n, env, cwd)),
                ("workspace run -- true", median_ms([*ws, "run", "--", "true"], args.n, env, cwd))]
        try_bin = shutil.which("try")
        if try_bin:
            sandbox = tmp / "try-sandbox"
            sandbox.mkdir()
            rows.append(("try DIR true (reused DIR)",
                         median_ms(try_argv(try_bin, str(sandbox)), max(5, args.n // 2), env, cwd)))
        report(rows)
    finally:
        subprocess.run([*ws, "discard", "--yes"], env=env, cwd=cwd, capture_output=True)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return 0


ENTRY_ARGV = """
import os
from manager.session.context import Context
from manager.engines.base import RunRequest
ctx = Context.load()
session = ctx.session()
argv = ctx.engine(session).entry_argv(session, RunRequest(command="true", cwd=os.getcwd()))
print("\\0".join(argv), end="\\0")
"""


def report(rows: list[tuple[str, float]]) -> None:
    base = rows[0][1]
    print(f"{'call':<34}{'median ms':>10}{'vs bash':>10}")
    for name, ms in rows:
        print(f"{name:<34}{ms:>10.2f}{ms - base:>+10.2f}")
    values = dict(rows)
    lean = values["lean entry (overlay/enter.sh)"] - base
    print(f"\nlean entry overhead over bash: {lean:.2f} ms (target <= 10 ms)")
    cli = values["workspace run -- true"] - base
    print(f"workspace run overhead over bash: {cli:.2f} ms (target <= 60 ms, issue 23)")
    if "try DIR true (reused DIR)" in values:
        ratio = values["workspace run -- true"] / values["try DIR true (reused DIR)"]
        print(f"workspace run / try: {ratio:.2f} (target < 0.5)")


if __name__ == "__main__":
    raise SystemExit(main())
