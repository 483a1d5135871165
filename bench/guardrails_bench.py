"""Benchmark: the Stop-hook budget check and a checkpoint against `git status --porcelain`.

A generated repository of FILES files (default 100,000) with 10 changed; every
figure is a median over the same repository in the same run. Targets (issue 6):
Stop hook within 2x of git status and under 0.5 s; a checkpoint within 3x.

    python bench/guardrails_bench.py [--files N] [--runs R] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

SID = "bench-session"


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


def generate(root: Path, files: int) -> None:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.name", "bench")
    git(root, "config", "user.email", "bench@example.com")
    for i in range(files):
        d = root / f"d{i // 1000:03d}" / f"s{(i // 100) % 10}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i}.txt").write_text(f"file {i}\n" + "content line\n" * 5)
    git(root, "add", "-A")
    git(root, "commit", "-qm", "generated")
    git(root, "status", "--porcelain")  # a warm, refreshed index, as a user's would be


def change(root: Path, count: int, tag: str) -> None:
    for i in range(count):
        path = root / f"d{i:03d}" / "s0" / f"f{i * 1000}.txt"
        with path.open("a") as f:
            f.write(f"changed {tag}\n")


def median(fn: Callable[[], object], runs: int,
           before: Callable[[], object] | None = None) -> float:
    times = []
    for _ in range(runs):
        if before:
            before()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--keep", help="build the repository here and keep it")
    args = parser.parse_args()
    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ws-bench-"))
    os.environ.update(GIT_CONFIG_GLOBAL="/dev/null", GIT_CONFIG_NOSYSTEM="1",
                      XDG_STATE_HOME=str(base / "state"), XDG_CONFIG_HOME=str(base / "config"))
    root = base / "repo"
    if not (root / ".git").exists():
        t0 = time.perf_counter()
        generate(root, args.files)
        print(f"generated {args.files} files in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    change(root, 10, "start")
    return report(root, args.runs)


def report(root: Path, runs: int) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from manager import guardrails
    from manager.guardtarget import for_hook

    payload = {"session_id": SID, "cwd": str(root), "hook_event_name": "Stop",
               "stop_hook_active": False}
    guardrails.on_session_start({"session_id": SID, "cwd": str(root), "source": "startup"})
    change(root, 10, "after baseline")
    status = lambda: subprocess.run(["git", "status", "--porcelain"], cwd=root,  # noqa: E731
                                    check=True, capture_output=True)
    os.environ["WORKSPACE_CHECKPOINTS__AUTO"] = "0"     # the budget check alone
    stop_check = lambda: guardrails.on_stop(payload)   # noqa: E731
    hook_cmd = [sys.executable, "-c", "import json,sys;from manager import guardrails;"
                f"json.dump(guardrails.on_stop(json.loads({json.dumps(json.dumps(payload))})),sys.stdout)"]
    stop_proc = lambda: subprocess.run(hook_cmd, check=True, capture_output=True,  # noqa: E731
                                       cwd=Path(__file__).resolve().parents[1])
    counter = iter(range(10**6))
    bump = lambda: change(root, 1, f"ckpt {next(counter)}")  # noqa: E731 - a real change each time
    take = lambda: guardrails.checkpoint(for_hook(SID, str(root)), "bench")  # noqa: E731

    figures = {"git_status": median(status, runs), "stop_check": median(stop_check, runs),
               "stop_hook_process": median(stop_proc, runs)}
    figures["checkpoint"] = median(take, runs, before=bump)
    figures["git_status_again"] = median(status, runs)
    ref = min(figures["git_status"], figures["git_status_again"])
    print(json.dumps({k: round(v, 4) for k, v in figures.items()}, indent=2))
    print(f"stop check: {figures['stop_check']:.3f} s = {figures['stop_check'] / ref:.2f}x git "
          f"status (target <2x, <0.5 s); as a hook process {figures['stop_hook_process']:.3f} s "
          f"= {figures['stop_hook_process'] / ref:.2f}x")
    print(f"checkpoint: {figures['checkpoint']:.3f} s = {figures['checkpoint'] / ref:.2f}x git "
          "status (target <3x)")
    ok = (figures["stop_check"] < 2 * ref and figures["stop_check"] < 0.5
          and figures["checkpoint"] < 3 * ref)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
