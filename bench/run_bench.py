"""Per-call cost of the built-in overlay engine, against baselines in the same run.

Measures on a warm session, the calls interleaved round by round (a loaded machine weighs
on each alike), the median of N runs each of wall time and of CPU time (user + system of
the process and all it waited for):
  bash -c true                       the floor
  python -I -c pass                  the interpreter's own start-up, for reference
  lean entry                         overlay/enter.sh, what the plugin emits per Bash call
  bin/workspace run -- true          the CLI as the plugin's launcher runs it (lean path)
  python -m manager run -- true      the CLI through runpy (lean path)
  workspace (console script) run     pip's `workspace` script, as the README installs it
  workspace run --cwd . -- true      the full path (an option: argparse, config, engine)
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

REPO = Path(__file__).resolve().parent.parent
BASH = "bash -c true"
CONSOLE = os.path.join(os.path.dirname(sys.executable), "workspace")
LAUNCHER = "bin/workspace run -- true"


def timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """(wall ms, CPU ms) of one run."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{argv} exited {proc.returncode}")
    return wall * 1000, (usage.ru_utime + usage.ru_stime) * 1000


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
    env = dict(os.environ, XDG_STATE_HOME=str(tmp / "state"), WORKSPACE_ENGINE="overlay",
               WORKSPACE_PYTHON=sys.executable)
    project = tmp / "project"
    project.mkdir()
    cwd = str(project)
    ws = [sys.executable, "-m", "manager"]
    try:
        subprocess.run([*ws, "run", "--", "true"], env=env, cwd=cwd, check=True)  # warm
        entry = subprocess.run([sys.executable, "-c", ENTRY_ARGV], env=env, cwd=cwd,
                               capture_output=True, text=True, check=True).stdout.split("\0")[:-1]
        calls = {BASH: ["bash", "-c", "true"],
                 "python -I -c pass": [sys.executable, "-I", "-c", "pass"],
                 "lean entry (overlay/enter.sh)": entry,
                 LAUNCHER: [str(REPO / "bin" / "workspace"), "run", "--", "true"],
                 "python -m manager run -- true": [*ws, "run", "--", "true"],
                 # pip's console script, as the README installs it
                 "workspace (console script) run": [CONSOLE, "run", "--", "true"],
                 "workspace run --cwd . -- true": [*ws, "run", "--cwd", ".", "--", "true"]}
        try_bin = shutil.which("try")
        if try_bin:
            sandbox = tmp / "try-sandbox"
            sandbox.mkdir()
            calls["try DIR true (reused DIR)"] = try_argv(try_bin, str(sandbox))
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in calls}
        for _ in range(args.n):
            for name, argv in calls.items():
                samples[name].append(timed(argv, env, cwd))
        report({name: (statistics.median(w for w, _ in s), statistics.median(c for _, c in s))
                for name, s in samples.items()}, args.n)
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


def report(rows: dict[str, tuple[float, float]], n: int) -> None:
    wall0, cpu0 = rows[BASH]
    print(f"median of {n} runs each, interleaved")
    print(f"{'call':<34}{'wall ms':>9}{'vs bash':>9}{'CPU ms':>9}{'vs bash':>9}")
    for name, (wall, cpu) in rows.items():
        print(f"{name:<34}{wall:>9.2f}{wall - wall0:>+9.2f}{cpu:>9.2f}{cpu - cpu0:>+9.2f}")
    lean = rows["lean entry (overlay/enter.sh)"][0] - wall0
    print(f"\nlean entry overhead over bash: {lean:.2f} ms wall (target <= 10 ms)")
    for name in (LAUNCHER, "python -m manager run -- true", "workspace (console script) run"):
        wall, cpu = rows[name]
        print(f"{name} over bash: {wall - wall0:.2f} ms wall, {cpu - cpu0:.2f} ms CPU "
              "(target <= 60 ms, issue 23)")
    if "try DIR true (reused DIR)" in rows:
        ratio = rows[LAUNCHER][0] / rows["try DIR true (reused DIR)"][0]
        print(f"workspace run / try: {ratio:.2f} (target < 0.5)")


if __name__ == "__main__":
    raise SystemExit(main())
