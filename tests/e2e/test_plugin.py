"""The real workspace plugin (loaded from this checkout with --plugin-dir) in the real client."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from .claude import REPO
from .claude import ClaudeEnv
from .claude import ClaudeRun
from .fake_api import Bash
from .fake_api import Tool
from .fake_api import user_texts

SIGPROBE = Path(__file__).resolve().parent / "sigprobe.py"
ENV = {"WORKSPACE_ENGINE": "overlay"}


def run(claude_env: ClaudeEnv, project: Path, script: list[Any], **kw: Any) -> ClaudeRun:
    kw.setdefault("env", ENV)
    return claude_env.run(project, script, plugin_dir=REPO, **kw)


def workspace(claude_env: ClaudeEnv, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = claude_env.environ(extra=ENV)
    return subprocess.run([sys.executable, "-m", "manager", *args], cwd=project, env=env,
                          capture_output=True, text=True, timeout=120)


def pending(claude_env: ClaudeEnv, project: Path) -> list[str]:
    done = workspace(claude_env, project, "status", "--json")
    assert done.returncode == 0, done.stderr
    return [c["path"] for c in json.loads(done.stdout)["changes"]]


def all_text(run_: ClaudeRun) -> str:
    return "\n".join(json.dumps(r.body) for r in run_.main_requests)


def test_writes_stay_in_the_sandbox_until_committed(claude_env: ClaudeEnv,
                                                    project_dir: Path) -> None:
    tmp_file = Path(f"/tmp/ws-e2e-{uuid.uuid4().hex}.txt")
    home_file = claude_env.home / "home.txt"
    write = f"echo p > proj.txt && echo h > $HOME/home.txt && echo t > {tmp_file} && echo ok"
    result = run(claude_env, project_dir, [Bash(write), Bash(f"cat proj.txt {home_file} "
                                                             f"{tmp_file}"), "done"])
    first, second = result.tool_results()
    assert (first.content, second.content) == ("ok", "p\nh\nt"), result.describe()
    assert not (project_dir / "proj.txt").exists() and not home_file.exists()
    assert not tmp_file.exists()
    assert set(pending(claude_env, project_dir)) >= {str(project_dir / "proj.txt"),
                                                      str(home_file), str(tmp_file)}
    committed = workspace(claude_env, project_dir, "commit")
    try:
        assert committed.returncode == 0, committed.stderr
        assert (project_dir / "proj.txt").read_text() == "p\n"
        assert home_file.read_text() == "h\n" and tmp_file.read_text() == "t\n"
        assert pending(claude_env, project_dir) == []
    finally:
        tmp_file.unlink(missing_ok=True)


def test_cd_persists_across_calls(claude_env: ClaudeEnv, project_dir: Path) -> None:
    (project_dir / "sub").mkdir()
    steps = [Bash("cd sub && pwd"), Bash("pwd"), Bash("mkdir -p only && cd only && pwd"),
             Bash("pwd"), Bash("cd .. && false"), Bash("pwd"), "done"]
    result = run(claude_env, project_dir, steps)
    out = [r.content for r in result.tool_results()]
    sub = str(project_dir / "sub")
    assert out[:4] == [sub, sub, f"{sub}/only", f"{sub}/only"], result.describe()
    assert out[4].startswith("Exit code 1") and out[5] == f"{sub}/only"
    assert not (project_dir / "sub" / "only").exists()


def test_git_status_shows_the_sandboxs_view(claude_env: ClaudeEnv, project_dir: Path) -> None:
    """git runs in the sandbox: the agent's git sees the agent's changes (issue 14)."""
    subprocess.run(["git", "init", "-q", str(project_dir)], check=True)
    (project_dir / "real.txt").write_text("r\n")
    steps = [Bash("echo s > sandboxed.txt"), Bash("git status --short"), "done"]
    result = run(claude_env, project_dir, steps)
    status = result.tool_results()[1].content
    assert "real.txt" in status and "sandboxed.txt" in status, result.describe()
    assert not (project_dir / "sandboxed.txt").exists()


def test_a_broken_session_denies(claude_env: ClaudeEnv, project_dir: Path) -> None:
    session_id = str(uuid.uuid4())
    record = claude_env.xdg_state / "workspace" / "sessions" / session_id / "session.json"
    record.parent.mkdir(parents=True)
    record.write_text("{corrupt")
    result = run(claude_env, project_dir, [Bash("touch x.txt"), "done"],
                 extra_args=["--session-id", session_id])
    (denied,) = result.tool_results()
    assert denied.is_error and "workspace doctor" in denied.content, result.describe()
    assert "session.json" in denied.content
    assert not (project_dir / "x.txt").exists()


def test_stop_and_resume_report_pending_changes(claude_env: ClaudeEnv, project_dir: Path) -> None:
    first = run(claude_env, project_dir, [Bash("echo 1 > one.txt"), "done"])
    assert first.result["result"] == "done" and "hook error" not in first.debug_log.lower()
    assert first.session_id is not None
    second = claude_env.resume(first.session_id, project_dir, ["again"], plugin_dir=REPO,
                               env=ENV)
    text = all_text(second)
    assert "1 change is pending" in text and "one.txt" in text, second.describe()


PERMISSION_CASES = [
    # (rules in user settings, mode, extra args, command, runs?)
    ({"deny": ["Bash(touch f.txt)"]}, "bypassPermissions", [], "touch f.txt", False),
    ({"allow": ["Bash(touch f.txt)"]}, "default", [], "touch f.txt", True),
    ({}, "default", [], "touch f.txt", False),                 # ask: denied in -p
    ({"ask": ["Bash(touch:*)"]}, "bypassPermissions", [], "touch f.txt", False),
    ({}, "default", ["--allowedTools", "Bash(touch f.txt)"], "touch f.txt", True),
    ({}, "dontAsk", [], "touch f.txt", False),
    ({}, "bypassPermissions", [], "touch f.txt", True),
]


@pytest.mark.parametrize("case", PERMISSION_CASES,
                         ids=[f"{c[1]}-{json.dumps(c[0])}-{c[2]}" for c in PERMISSION_CASES])
def test_permissions_stay_the_users(claude_env: ClaudeEnv, project_dir: Path,
                                    case: tuple[Any, ...]) -> None:
    rules, mode, extra, command, runs = case
    if rules:
        claude_env.write_user_settings({"permissions": rules})
    result = run(claude_env, project_dir, [Bash(command), "done"], permission_mode=mode,
                 extra_args=extra)
    (tool,) = result.tool_results()
    assert tool.is_error is (not runs), result.describe()
    assert len(result.permission_denials) == (0 if runs else 1)
    assert not (project_dir / "f.txt").exists()            # sandboxed either way
    assert (str(project_dir / "f.txt") in pending(claude_env, project_dir)) is runs


def test_edit_read_and_write_of_a_file_the_sandbox_changed(claude_env: ClaudeEnv,
                                                           project_dir: Path) -> None:
    target = project_dir / "f.txt"
    target.write_text("real\n")
    steps = [Bash("echo sandboxed > f.txt"),
             Tool("Read", {"file_path": str(target)}),
             Tool("Edit", {"file_path": str(target), "old_string": "real", "new_string": "x"}),
             Tool("Write", {"file_path": str(target), "content": "written\n"}),
             Bash("cat f.txt"), "done"]
    result = run(claude_env, project_dir, steps)
    _, read, edit, write, cat = result.tool_results()
    assert "sandboxed" in read.content, result.describe()
    assert edit.is_error and "/workspace:commit" in edit.content
    assert not write.is_error and target.read_text() == "written\n"
    assert cat.content == "written"


def _probe_tree(log: Path, seconds: int) -> str:
    probe = f"{sys.executable} {SIGPROBE} {log} {seconds}"
    return f"echo begin; {probe} amp & setsid {probe} setsid & {probe} fg; echo fg-done"


def _probes_alive(log: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if str(log) in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


@pytest.mark.parametrize("background", [False, True], ids=["timeout", "background-limit"])
def test_killed_commands_leave_nothing_running(claude_env: ClaudeEnv, project_dir: Path,
                                               tmp_path: Path, background: bool) -> None:
    log = tmp_path / "sig.log"
    step = Bash(_probe_tree(log, 20), timeout=1500, run_in_background=background or None)
    env = dict(ENV) if background else dict(ENV, CLAUDE_CODE_DISABLE_BACKGROUND_TASKS="1")
    started = time.monotonic()
    result = run(claude_env, project_dir, [step, "waiting"], env=env)
    (tool,) = result.tool_results()
    if not background:
        assert tool.is_error and "timed out" in tool.content, result.describe()
    assert time.monotonic() - started < 15
    deadline = time.monotonic() + 5
    while _probes_alive(log) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _probes_alive(log) == [], result.describe()


def test_plugin_validates(claude_env: ClaudeEnv) -> None:
    done = subprocess.run([str(claude_env.claude_bin), "plugin", "validate", str(REPO)],
                          env=claude_env.environ(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Validation passed" in done.stdout + done.stderr


def test_slash_commands_status_and_passthrough(claude_env: ClaudeEnv, project_dir: Path) -> None:
    first = run(claude_env, project_dir, [Bash("echo x > a.txt"), "done"])
    assert first.session_id is not None
    status = claude_env.resume(first.session_id, project_dir, ["ok"], plugin_dir=REPO, env=ENV,
                               prompt="/workspace:status")
    assert "added:     a.txt" in all_text(status), status.describe()
    bypass = claude_env.resume(first.session_id, project_dir, [Bash("touch out.txt"),
                                                               Bash("touch in.txt"), "ok"],
                               plugin_dir=REPO, env=ENV, prompt="/workspace:passthrough")
    assert "runs OUTSIDE the sandbox (once)" in all_text(bypass), bypass.describe()
    assert (project_dir / "out.txt").exists()           # the one call the user let out
    assert not (project_dir / "in.txt").exists()        # and only that one


def test_gc_after_the_client_exited(claude_env: ClaudeEnv, project_dir: Path) -> None:
    busy = run(claude_env, project_dir, [Bash("echo 1 > kept.txt"), "done"])
    idle = run(claude_env, project_dir, [Bash("true"), "done"])
    from manager.session import store

    sessions = claude_env.xdg_state / "workspace" / "sessions"
    records = {s: json.loads((sessions / str(s) / store.RECORD).read_text())
               for s in (busy.session_id, idle.session_id)}
    assert all(r["client_pid"] and r["client_start"] for r in records.values())
    done = workspace(claude_env, project_dir, "gc", "--json")
    report = json.loads(done.stdout)
    assert report["removed"] == [idle.session_id], done.stdout
    assert [k["id"] for k in report["kept"]] == [busy.session_id]


def test_ask_names_the_original_command(claude_env: ClaudeEnv, project_dir: Path) -> None:
    result = run(claude_env, project_dir, [Bash("touch asked.txt"), "done"],
                 permission_mode="default")
    (tool,) = result.tool_results()
    # -p cannot prompt: the call is refused, with the hook's reason as the tool result
    assert tool.is_error and "runs `touch asked.txt` in the sandbox" in tool.content, \
        result.describe()
    # the denial records the wrapped input; the debug log the reason with the original
    assert "overlay/enter.sh" in result.permission_denials[0]["tool_input"]["command"]
    assert "returned permissionDecision: ask (reason: workspace: runs `touch asked.txt`" \
        in result.debug_log


def _git_project(project_dir: Path, limit: int) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@e", *args],
                       cwd=project_dir, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    (project_dir / "app.py").write_text("print('hello')\n")
    (project_dir / ".workspace.yaml").write_text(f"budget:\n  limit: {limit}\n")
    git("add", "-A")
    git("commit", "-qm", "initial")


def test_diff_budget_blocks_once_then_checkpoint_and_rewind(claude_env: ClaudeEnv,
                                                            project_dir: Path) -> None:
    _git_project(project_dir, limit=20)
    user_git = subprocess.run(["git", "status", "--porcelain"], cwd=project_dir,
                              capture_output=True, text=True, check=True).stdout
    script = [Bash("seq 1 30 > big.txt && echo '# v2' >> app.py && echo made"),
              "first answer", "second answer"]
    result = run(claude_env, project_dir, script)
    assert result.outputs() == ["made"], result.describe()
    assert not (project_dir / "big.txt").exists()            # sandboxed: the budget saw the overlay
    # Stop blocked once with the documented reason; the client sent one more request; the next
    # Stop (stop_hook_active) let the session end.
    assert result.result["result"] == "second answer", result.describe()
    assert len(result.main_requests) == 3
    reason = " ".join(user_texts(result.main_requests[2].body))
    assert "Diff budget exceeded: 31/20 lines changed" in reason, reason
    assert "big.txt (30)" in reason and "/workspace:reset" in reason
    assert "hook error" not in result.debug_log.lower()

    listed = workspace(claude_env, project_dir, "checkpoints", "--json")
    assert listed.returncode == 0, listed.stderr
    (auto,) = json.loads(listed.stdout)["checkpoints"]
    assert (auto["auto"], auto["files"], auto["lines"]) == (True, 2, 31)

    changed = workspace(claude_env, project_dir, "run", "--", "sh", "-c",
                        "rm big.txt && echo later > later.txt")
    assert changed.returncode == 0, changed.stderr
    rewound = workspace(claude_env, project_dir, "rewind", str(auto["id"]), "--json")
    assert rewound.returncode == 0, rewound.stderr
    view = workspace(claude_env, project_dir, "run", "--", "sh", "-c",
                     "wc -l < big.txt; tail -n1 app.py; ls later.txt 2>&1 | grep -c 'No such'")
    assert view.stdout.split("\n")[:3] == ["30", "# v2", "1"], view.stdout + view.stderr
    assert subprocess.run(["git", "status", "--porcelain"], cwd=project_dir, capture_output=True,
                          text=True, check=True).stdout == user_git
    budget = json.loads(workspace(claude_env, project_dir, "budget", "--json").stdout)
    assert (budget["used"], budget["limit"], budget["over"]) == (31, 20, True)
