"""Latency of the plugin's PreToolUse hook and of a whole sandboxed Bash call.

Measures, median of N runs each, in one invocation, on a warm session (overlay engine):
  python3 -c pass                    the bare interpreter, as found on PATH
  PY -c pass                         the interpreter the hook runs with (site on)
  PreToolUse hook                    bin/workspace-hook: process start to JSON out
  PreToolUse passthrough             the same for `docker ps -a`, which the judge lets through
  call unsandboxed                   the client's shell running `true` as it does
  call sandboxed                     the same with the rewritten command (entry + finish)
  hook + sandboxed call              what a Bash call costs with the plugin in total

Target (issue #3): the hook's median within 15 ms of the bare interpreter.
Usage: python bench/hook_bench.py [-n 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HOOK = REPO / "bin" / "workspace-hook"
TARGET_MS = 15.0


def timed(argv: list[str], env: dict[str, str], cwd: str,
          stdin: bytes = b"") -> tuple[float, bytes]:
    start = time.perf_counter()
    done = subprocess.run(argv, input=stdin, env=env, cwd=cwd, capture_output=True, check=True)
    return (time.perf_counter() - start) * 1000, done.stdout


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def client_shell(command: str, cwd_file: Path) -> list[str]:
    """What Claude Code spawns for a Bash call (docs/notes-claude-client.md)."""
    escaped = command.replace("'", "'\"'\"'")
    return ["/bin/bash", "-c", f"eval '{escaped}' && pwd -P >| {cwd_file}"]


def payload(project: Path, n: int, command: str = "true") -> bytes:
    return json.dumps({"session_id": "bench", "cwd": str(project), "hook_event_name": "PreToolUse",
                       "permission_mode": "bypassPermissions", "tool_name": "Bash",
                       "tool_input": {"command": command, "description": "bench"},
                       "tool_use_id": f"toolu_{n:05d}"}).encode()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=30)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="ws-hook-bench-"))
    project = tmp / "project"
    project.mkdir()
    env = dict(os.environ, XDG_STATE_HOME=str(tmp / "state"), WORKSPACE_ENGINE="overlay",
               CLAUDE_PROJECT_DIR=str(project), CLAUDE_PLUGIN_ROOT=str(REPO), HOME=str(tmp))
    cwd, cwd_file = str(project), tmp / "cwd"
    py = str(REPO / ".venv" / "bin" / "python") if (REPO / ".venv").is_dir() else sys.executable
    python3 = shutil.which("python3") or py
    try:
        start = json.dumps({"session_id": "bench", "cwd": cwd, "hook_event_name": "SessionStart",
                            "source": "startup"}).encode()
        timed([str(HOOK), "SessionStart"], env, cwd, start)
        rows: dict[str, list[float]] = {k: [] for k in (
            "python3 -c pass", "PY -c pass", "PreToolUse hook", "PreToolUse passthrough",
            "call unsandboxed",
            "call sandboxed", "hook + sandboxed call")}
        for i in range(args.n + 1):          # round-robin, so load changes hit every row
            samples = {
                "python3 -c pass": timed([python3, "-c", "pass"], env, cwd)[0],
                "PY -c pass": timed([py, "-c", "pass"], env, cwd)[0],
                "call unsandboxed": timed(client_shell("true", cwd_file), env, cwd)[0],
            }
            hook_ms, out = timed([str(HOOK), "PreToolUse"], env, cwd, payload(project, i))
            samples["PreToolUse passthrough"] = timed(
                [str(HOOK), "PreToolUse"], env, cwd, payload(project, 10000 + i, "docker ps -a"))[0]
            command = json.loads(out)["hookSpecificOutput"]["updatedInput"]["command"]
            call_ms = timed(client_shell(command, cwd_file), env, cwd)[0]
            samples.update({"PreToolUse hook": hook_ms, "call sandboxed": call_ms,
                            "hook + sandboxed call": hook_ms + call_ms})
            if i:                            # the first round warms the holder
                for key, value in samples.items():
                    rows[key].append(value)
        report(rows, python3, py)
        hook = median(rows["PreToolUse hook"])
        floor = min(median(rows["python3 -c pass"]), median(rows["PY -c pass"]))
        return 0 if hook - floor <= TARGET_MS else 1
    finally:
        subprocess.run([py, "-m", "manager", "gc"], env=env, cwd=cwd, capture_output=True)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)


def report(rows: dict[str, list[float]], python3: str, py: str) -> None:
    print(f"python3 = {python3}\nPY      = {py}")
    for name, samples in rows.items():
        print(f"  {name:<24} {median(samples):8.2f} ms   (median of {len(samples)})")
    hook = median(rows["PreToolUse hook"])
    for base in ("python3 -c pass", "PY -c pass"):
        delta = hook - median(rows[base])
        verdict = "ok" if delta <= TARGET_MS else "OVER"
        print(f"  hook - {base:<17} {delta:+8.2f} ms   target <= {TARGET_MS:.0f} ms: {verdict}")
    extra = median(rows["hook + sandboxed call"]) - median(rows["call unsandboxed"])
    print(f"  per-call cost of the plugin {extra:+8.2f} ms over the unsandboxed call")


if __name__ == "__main__":
    raise SystemExit(main())
