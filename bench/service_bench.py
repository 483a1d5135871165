"""The whole per-call overhead of the plugin, command hook against the resident service (issue 25).

Per round, in one run, on a warm session (the default engine): the client's shell running
`true` as it does (the bare call), then for each transport its PreToolUse hook (process start
to JSON out) and the rewritten command. A round's overhead is hook + sandboxed call - bare
call; each row is the median over the rounds (round-robin, so load hits every row):

  python hook        bin/workspace-hook with WORKSPACE_SERVICE=0: today's hook, a Python start
  service            bin/workspace-hook asking `workspace serve` (bash's /dev/tcp, no Python)

Goal (issue 25): the service's overhead 10 ms or less. Claude Code's own bubblewrap sandbox is
measured only where `bwrap` is installed (said so otherwise).
Usage: python bench/service_bench.py [-n 30]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hook_bench import HOOK
from hook_bench import REPO
from hook_bench import client_shell
from hook_bench import payload
from hook_bench import timed

GOAL_MS = 10.0
TRANSPORTS = {"python hook": "0", "service": "1"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=30)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ws-service-bench-"))
    project = tmp / "project"
    project.mkdir()
    env = dict(os.environ, XDG_STATE_HOME=str(tmp / "state"), CLAUDE_PROJECT_DIR=str(project),
               CLAUDE_PLUGIN_ROOT=str(REPO), HOME=str(tmp), WORKSPACE_SERVICE="1")
    env.pop("WORKSPACE_ENGINE", None)                 # the default engine
    cwd, cwd_file = str(project), tmp / "cwd"
    py = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").is_dir() else sys.executable
    try:
        start = json.dumps({"session_id": "bench", "cwd": cwd, "hook_event_name": "SessionStart",
                            "source": "startup"}).encode()
        timed([str(HOOK), "SessionStart"], env, cwd, start)
        _await_service(env, cwd, tmp)
        rows: dict[str, list[float]] = {"bare call": []}
        for name in TRANSPORTS:
            rows.update({f"{name}: hook": [], f"{name}: sandboxed call": [],
                         f"{name}: overhead": []})
        if shutil.which("bwrap"):
            rows["bubblewrap call"] = []
        for i in range(args.n + 1):
            sample = _round(env, cwd, cwd_file, project, i)
            if i:                                    # the first round warms the holder
                for key, value in sample.items():
                    rows[key].append(value)
        report(rows)
        return 0 if statistics.median(rows["service: overhead"]) <= GOAL_MS else 1
    finally:
        _stop_service(tmp)
        end = json.dumps({"session_id": "bench", "cwd": cwd, "hook_event_name": "SessionEnd",
                          "reason": "other"}).encode()
        subprocess.run([str(HOOK), "SessionEnd"], input=end, env=env, cwd=cwd, capture_output=True)
        subprocess.run([py, "-m", "manager", "gc"], env=env, cwd=cwd, capture_output=True)
        subprocess.run([py, "-c", "import sys; from manager.fs import longpath; "
                        "longpath.remove_tree(sys.argv[1])", str(tmp)], cwd=REPO, check=False)


def _round(env: dict[str, str], cwd: str, cwd_file: Path, project: Path,
           i: int) -> dict[str, float]:
    bare = timed(client_shell("true", cwd_file), env, cwd)[0]
    sample = {"bare call": bare}
    for name, flag in TRANSPORTS.items():
        hook_ms, out = timed([str(HOOK), "PreToolUse"], dict(env, WORKSPACE_SERVICE=flag), cwd,
                             payload(project, 2 * i + (flag == "1")))
        command = json.loads(out)["hookSpecificOutput"]["updatedInput"]["command"]
        call_ms = timed(client_shell(command, cwd_file), env, cwd)[0]
        sample.update({f"{name}: hook": hook_ms, f"{name}: sandboxed call": call_ms,
                       f"{name}: overhead": hook_ms + call_ms - bare})
    if shutil.which("bwrap"):
        sample["bubblewrap call"] = timed(["bwrap", "--ro-bind", "/", "/", "--dev", "/dev",
                                           "--unshare-all", "/bin/bash", "-c", "true"],
                                          env, cwd)[0] - bare
    return sample


def _await_service(env: dict[str, str], cwd: str, tmp: Path) -> None:
    """A Bash call's first hook starts the service; wait until it listens."""
    timed([str(HOOK), "PreToolUse"], env, cwd, payload(Path(cwd), 99999))
    endpoint = tmp / "state" / "workspace" / "service" / "endpoint"
    deadline = time.monotonic() + 30
    while not endpoint.exists():
        if time.monotonic() > deadline:
            raise SystemExit("the service did not start")
        time.sleep(0.05)


def _stop_service(tmp: Path) -> None:
    with contextlib.suppress(OSError, ValueError):
        os.kill(int((tmp / "state" / "workspace" / "service" / "pid").read_text()), signal.SIGTERM)


def report(rows: dict[str, list[float]]) -> None:
    for name, samples in rows.items():
        print(f"  {name:<28} {statistics.median(samples):8.2f} ms   (median of {len(samples)})")
    if "bubblewrap call" not in rows:
        print("  bubblewrap call              not measured: bwrap is not installed here")
    for name in TRANSPORTS:
        over = statistics.median(rows[f"{name}: overhead"])
        verdict = "ok" if over <= GOAL_MS else "OVER"
        print(f"  per-call overhead, {name:<12} {over:+8.2f} ms   goal <= {GOAL_MS:.0f} ms: {verdict}")


if __name__ == "__main__":
    raise SystemExit(main())
