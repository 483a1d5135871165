"""The e2e harness proven with the real Claude Code CLI, and client behaviours the plugin needs.

Each test builds a throwaway probe plugin (hooks that log their stdin and answer as configured) and
runs one or two scripted ``claude -p`` sessions. Findings are written up in
``docs/notes-claude-client.md``; a failure here means the client changed under us.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .claude import ClaudeEnv
from .fake_api import Bash
from .fake_api import FakeAnthropic
from .fake_api import user_texts
from .probe_plugin import ProbePlugin
from .probe_plugin import make_probe_plugin

SIGPROBE = Path(__file__).resolve().parent / "sigprobe.py"
COMMON = {"session_id", "transcript_path", "cwd", "hook_event_name"}


@pytest.fixture
def plugin(tmp_path: Path) -> ProbePlugin:
    return make_probe_plugin(tmp_path / "probe-plugin")


def probe(log: Path, seconds: float, tag: str, mode: str = "stay") -> str:
    return f"{sys.executable} {SIGPROBE} {log} {seconds} {tag} {mode}"


def process_tree(log: Path, seconds: float, mode: str = "stay") -> str:
    """A command whose tree has a foreground child, a `&` child and a child in its own session."""
    return (
        f"echo begin; {probe(log, seconds, 'amp', mode)} & "
        f"setsid {probe(log, seconds, 'setsid', mode)} & "
        f"{probe(log, seconds, 'fg', mode)}; echo fg-done"
    )


def records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def last_alive(log: Path, tag: str) -> float:
    return float(Path(f"{log}.alive-{tag}").read_text())


# --- the fake server on its own ------------------------------------------------------------------


def test_fake_api_streams_script_and_answers_side_requests() -> None:
    import urllib.request

    def post(url: str, body: dict[str, Any]) -> str:
        req = urllib.request.Request(
            url, json.dumps(body).encode(), {"content-type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            return str(resp.read().decode())

    bash_tools = {"tools": [{"name": "Bash"}], "stream": True, "messages": []}
    with FakeAnthropic([Bash("echo hi", timeout=5000), "bye"]) as fake:
        first = post(fake.base_url + "/v1/messages?beta=true", bash_tools)
        side = post(fake.base_url + "/v1/messages?beta=true", {"tools": [], "stream": False})
        second = post(fake.base_url + "/v1/messages", bash_tools)
        other = post(fake.base_url + "/api/anything", {})
        after = post(fake.base_url + "/v1/messages", bash_tools)
    names = [line.split(": ", 1)[1] for line in first.splitlines() if line.startswith("event: ")]
    assert names == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    assert (
        '"input_json_delta"' in first and '\\"timeout\\": 5000' in first and '"tool_use"' in first
    )
    assert json.loads(side)["content"][0]["type"] == "text"
    assert '"text_delta"' in second and "bye" in second and '"end_turn"' in second
    assert other == "{}"
    assert "Done." in after
    assert [r.kind for r in fake.requests] == ["main", "side", "main", "other", "main"]
    assert [r.step for r in fake.requests] == [0, None, 1, None, None]


# --- (a)-(e): the harness with the real client ----------------------------------------------------


def test_bash_output_comes_back_as_tool_result(
    run_claude: Any, project_dir: Path, plugin: ProbePlugin
) -> None:
    steps = [Bash("echo out; echo err >&2"), Bash("exit 3"), "finished"]
    run = run_claude(project_dir, steps, plugin_dir=plugin.root)
    assert run.result["result"] == "finished", run.describe()
    first, second = run.tool_results()
    assert first.command == "echo out; echo err >&2"
    assert first.content == "out\nerr" and not first.is_error
    assert second.is_error and second.content == "Exit code 3"
    assert len(run.main_requests) == 3
    assert "--bare" not in run.args
    assert "[DEBUG]" in run.debug_log
    # a failing command fires PreToolUse but no PostToolUse
    assert [e for e in plugin.events() if e.endswith("ToolUse")] == [
        "PreToolUse",
        "PostToolUse",
        "PreToolUse",
    ]


def test_hook_sequence_fields_and_rewrite(
    run_claude: Any, project_dir: Path, plugin: ProbePlugin
) -> None:
    plugin.configure(rewrite={"echo orig": "echo rewritten"})
    run = run_claude(
        project_dir, [Bash("echo orig", description="say orig"), "end"], plugin_dir=plugin.root
    )
    assert plugin.events() == [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolUse",
        "Stop",
        "SessionEnd",
    ]
    calls = {c["event"]: c for c in plugin.calls()}
    for event, call in calls.items():
        data = call["input"]
        assert data.keys() >= COMMON, event
        assert data["session_id"] == run.session_id
        assert data["cwd"] == str(project_dir)
        assert call["cwd"] == str(project_dir)  # hooks run in the project
        assert call["env"]["CLAUDE_PROJECT_DIR"] == str(project_dir)
        assert call["env"]["CLAUDE_PLUGIN_ROOT"] == str(plugin.root)
        assert call["env"]["CLAUDE_PLUGIN_DATA"].endswith("/plugins/data/probe-inline")
    assert calls["SessionStart"]["input"]["source"] == "startup"
    assert "CLAUDE_ENV_FILE" in calls["SessionStart"]["env"]
    assert calls["UserPromptSubmit"]["input"]["prompt"] == "Run the scripted commands."
    pre, post = calls["PreToolUse"]["input"], calls["PostToolUse"]["input"]
    assert pre["tool_name"] == "Bash" and pre["permission_mode"] == "bypassPermissions"
    assert pre["tool_input"] == {"command": "echo orig", "description": "say orig"}
    assert pre["tool_use_id"] == post["tool_use_id"]
    # (c) the rewritten command is what ran, and PostToolUse sees the rewritten input
    assert post["tool_input"]["command"] == "echo rewritten"
    assert post["tool_response"]["stdout"] == "rewritten"
    assert {"stdout", "stderr", "interrupted", "isImage", "noOutputExpected"} <= post[
        "tool_response"
    ].keys()
    (result,) = run.tool_results()
    assert result.content == "rewritten"
    assert result.command == "echo orig"  # the model's history keeps the original
    stop = calls["Stop"]["input"]
    assert stop["stop_hook_active"] is False and stop["last_assistant_message"] == "end"
    assert calls["SessionEnd"]["input"]["reason"] == "other"


def test_stop_block_causes_one_more_request(
    run_claude: Any, project_dir: Path, plugin: ProbePlugin
) -> None:
    plugin.configure(stop_block="Please check the diff budget.")
    run = run_claude(project_dir, ["first answer", "second answer"], plugin_dir=plugin.root)
    assert run.result["result"] == "second answer"
    assert len(run.main_requests) == 2
    assert any("Please check the diff budget." in t for t in user_texts(run.main_requests[1].body))
    stops = plugin.inputs("Stop")
    assert [s["stop_hook_active"] for s in stops] == [False, True]
    assert [s["last_assistant_message"] for s in stops] == ["first answer", "second answer"]


def test_resume_and_init_only(
    claude_env: ClaudeEnv, project_dir: Path, plugin: ProbePlugin
) -> None:
    first = claude_env.run(project_dir, [Bash("echo one"), "one"], plugin_dir=plugin.root)
    assert first.session_id is not None
    plugin.clear()
    second = claude_env.resume(first.session_id, project_dir, ["two"], plugin_dir=plugin.root)
    assert second.session_id == first.session_id
    (start,) = plugin.inputs("SessionStart")
    assert start["source"] == "resume" and start["session_id"] == first.session_id
    # the resumed conversation carries the first session's tool result
    assert [r.content for r in second.tool_results()] == ["one"]

    plugin.clear()
    init = claude_env.init_only(project_dir, plugin_dir=plugin.root)
    assert init.returncode == 0, init.describe()
    assert plugin.events() == ["SessionStart", "SessionEnd"]
    assert init.requests == []


# --- (f) permission rules against the rewritten command -------------------------------------------

ORIG, NEW = "touch orig.txt", "touch rewritten.txt"
RULE = {"orig": f"Bash({ORIG})", "new": f"Bash({NEW})"}
# (rewrite?, hook decision, rule kind, rule target, permission mode, expected file or None)
PERMISSION_CASES = [
    (False, None, "allow", "orig", "default", "orig.txt"),
    (True, None, "allow", "orig", "default", None),  # the user's allow no longer matches
    (True, None, "allow", "new", "default", "rewritten.txt"),
    (False, None, "deny", "orig", "bypassPermissions", None),
    (True, None, "deny", "orig", "bypassPermissions", "rewritten.txt"),  # deny silently bypassed
    (True, "allow", "deny", "orig", "default", "rewritten.txt"),  # hook allow beats the deny
    (True, "allow", "deny", "new", "default", None),  # deny on what runs still holds
    (False, None, "ask", "orig", "bypassPermissions", None),  # ask in -p = denied
    (True, None, "ask", "orig", "bypassPermissions", "rewritten.txt"),
    (True, "allow", "ask", "new", "default", None),
]


def _permission_id(case: tuple[Any, ...]) -> str:
    rw, decision, kind, target, mode, _ = case
    return f"{'rewrite' if rw else 'plain'}-hook_{decision}-{kind}_{target}-{mode}"


def _run_permission_case(
    claude_env: ClaudeEnv,
    project_dir: Path,
    plugin: ProbePlugin,
    source: str,
    case: tuple[Any, ...],
) -> None:
    rw, decision, kind, target, mode, expected = case
    behaviour: dict[str, Any] = {"rewrite": {ORIG: NEW}} if rw else {}
    if decision:
        behaviour["decision"] = decision
    plugin.configure(**behaviour)
    extra: list[str] = []
    rule = RULE[target]
    if source == "flag":
        extra = ["--allowedTools" if kind == "allow" else "--disallowedTools", rule]
    elif source == "user":
        claude_env.write_user_settings({"permissions": {kind: [rule]}})
    else:
        claude_env.trust(project_dir)
        (project_dir / ".claude").mkdir()
        (project_dir / ".claude" / "settings.json").write_text(
            json.dumps({"permissions": {kind: [rule]}})
        )
    run = claude_env.run(
        project_dir,
        [Bash(ORIG), "end"],
        plugin_dir=plugin.root,
        permission_mode=mode,
        extra_args=extra,
    )
    created = sorted(p.name for p in project_dir.glob("*.txt"))
    assert created == ([expected] if expected else []), run.describe()
    assert len(run.permission_denials) == (0 if expected else 1)
    (result,) = run.tool_results()
    assert result.is_error == (expected is None)


@pytest.mark.parametrize("case", [c for c in PERMISSION_CASES if c[2] != "ask"], ids=_permission_id)
def test_permission_rules_flags(
    claude_env: ClaudeEnv, project_dir: Path, plugin: ProbePlugin, case: tuple[Any, ...]
) -> None:
    _run_permission_case(claude_env, project_dir, plugin, "flag", case)


@pytest.mark.parametrize("case", PERMISSION_CASES, ids=_permission_id)
def test_permission_rules_user_settings(
    claude_env: ClaudeEnv, project_dir: Path, plugin: ProbePlugin, case: tuple[Any, ...]
) -> None:
    _run_permission_case(claude_env, project_dir, plugin, "user", case)


def test_permission_untrusted_project_settings(claude_env: ClaudeEnv, project_dir: Path) -> None:
    (project_dir / ".claude").mkdir()
    settings = {"permissions": {"allow": [RULE["orig"]], "deny": ["Bash(touch denied.txt)"]}}
    (project_dir / ".claude" / "settings.json").write_text(json.dumps(settings))
    run = claude_env.run(
        project_dir, [Bash(ORIG), Bash("touch denied.txt"), "end"], permission_mode=None
    )
    assert list(project_dir.glob("*.txt")) == []  # allow ignored, deny applied
    assert len(run.permission_denials) == 2
    # settings.local.json allow rules do apply in an untrusted project
    (project_dir / ".claude" / "settings.local.json").write_text(json.dumps(settings))
    claude_env.run(project_dir, [Bash(ORIG), "end"], permission_mode=None)
    assert [p.name for p in project_dir.glob("*.txt")] == ["orig.txt"]


def test_hook_ask_and_deny_in_print_mode(
    claude_env: ClaudeEnv, project_dir: Path, plugin: ProbePlugin
) -> None:
    for decision in ("ask", "deny"):
        plugin.configure(rewrite={ORIG: NEW}, decision=decision)
        run = claude_env.run(project_dir, [Bash(ORIG), "end"], plugin_dir=plugin.root)
        (result,) = run.tool_results()
        assert result.is_error and "probe plugin says " + decision in result.content
        assert len(run.permission_denials) == 1
    assert list(project_dir.glob("*.txt")) == []


# --- timeouts, background, kill signals ----------------------------------------------------------


def test_foreground_overrun_moves_to_background(
    run_claude: Any, project_dir: Path, plugin: ProbePlugin, tmp_path: Path
) -> None:
    log = tmp_path / "sig.log"
    run = run_claude(
        project_dir, [Bash(process_tree(log, 3), timeout=1000), "waiting"], plugin_dir=plugin.root
    )
    (result,) = run.tool_results()[:1]
    assert result.content.startswith(
        "begin\nCommand did not complete within its 1s timeout and was "
        "moved to the background (ID: "
    )
    assert "/tasks/" in result.content and not result.is_error
    (post,) = plugin.inputs("PostToolUse")
    assert (
        post["tool_response"]["timedOutAfterMs"] == 1000
        and post["tool_response"]["backgroundTaskId"]
    )
    # nothing was signalled, everything ran to its end, and -p waited for it
    recs = records(log)
    assert not [r for r in recs if "signal" in r]
    assert sorted(r["tag"] for r in recs if r.get("end")) == ["amp", "fg", "setsid"]
    assert run.duration >= 3
    notes = [t for t in user_texts(run.main_requests[-1].body) if "<task-notification>" in t]
    assert notes and "<status>completed</status>" in notes[-1]


def _assert_tree_terminated(log: Path) -> None:
    recs = records(log)
    starts = {r["tag"]: r for r in recs if r.get("start")}
    assert set(starts) == {"amp", "fg", "setsid"}
    # the command runs in its own session and process group; setsid escapes both
    assert starts["fg"]["pgid"] == starts["fg"]["sid"] == starts["fg"]["ppid"]
    assert starts["amp"]["pgid"] == starts["fg"]["pgid"]
    assert starts["setsid"]["sid"] == starts["setsid"]["pid"] != starts["fg"]["sid"]
    signals = [(r["tag"], r["signal"]) for r in recs if "signal" in r]
    assert sorted(signals) == [("amp", "SIGTERM"), ("fg", "SIGTERM"), ("setsid", "SIGTERM")]
    assert not [r for r in recs if r.get("end")]
    term_at = min(r["t"] for r in recs if "signal" in r)
    for tag in starts:  # all of them ignore SIGTERM, so SIGKILL ended them, ~1.5 s later
        assert 0.5 < last_alive(log, tag) - term_at < 4, tag


def test_background_timeout_kills_whole_tree(
    run_claude: Any, project_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "sig.log"
    run = run_claude(
        project_dir, [Bash(process_tree(log, 15), run_in_background=True, timeout=1000), "waiting"]
    )
    (result,) = run.tool_results()
    assert result.content.startswith("Command running in background with ID: ")
    _assert_tree_terminated(log)
    note = [t for t in user_texts(run.main_requests[-1].body) if "<task-notification>" in t][-1]
    assert "<status>killed</status>" in note and "background time limit" in note
    assert run.duration < 10


def test_foreground_timeout_kills_when_background_disabled(
    run_claude: Any, project_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "sig.log"
    run = run_claude(
        project_dir,
        [Bash(process_tree(log, 15), timeout=1000), "waiting"],
        env={"CLAUDE_CODE_DISABLE_BACKGROUND_TASKS": "1"},
    )
    (result,) = run.tool_results()
    assert result.is_error
    assert result.content == "Exit code 143\nCommand timed out after 1s\nbegin"
    _assert_tree_terminated(log)


def test_interrupting_the_client_kills_the_tree(
    claude_env: ClaudeEnv, project_dir: Path, tmp_path: Path
) -> None:
    log = tmp_path / "sig.log"

    def interrupt() -> None:
        deadline = time.time() + 20
        while time.time() < deadline and not Path(f"{log}.alive-fg").exists():
            time.sleep(0.05)
        time.sleep(0.3)
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    cmdline = (entry / "cmdline").read_bytes()
                except OSError:
                    continue
                if str(claude_env.root).encode() in cmdline and b"--debug-file" in cmdline:
                    os.kill(int(entry.name), signal.SIGINT)

    thread = threading.Thread(target=interrupt)
    thread.start()
    run = claude_env.run(project_dir, [Bash(process_tree(log, 15)), "after"], check=False)
    thread.join()
    _assert_tree_terminated(log)
    # SIGINT in -p: the turn is aborted, the JSON result says so, exit status 0
    assert run.returncode == 0 and run.result["is_error"] is True
    assert run.result["terminal_reason"] == "aborted_tools"


# --- the spawned shell and cwd tracking -----------------------------------------------------------


def test_shell_command_line_and_cwd_tracking(
    claude_env: ClaudeEnv, project_dir: Path, tmp_path: Path
) -> None:
    (project_dir / "sub").mkdir()
    gone = project_dir / "gone"
    outside = tmp_path / "outside"
    outside.mkdir()
    show = "tr '\\0' '\\n' < /proc/$$/cmdline; echo; ps -o pid=,pgid=,sid= -p $$"
    steps = [
        Bash(show),
        Bash("cd sub && pwd"),
        Bash("pwd"),  # 2: cd stuck
        Bash("cd .. && false"),
        Bash("pwd"),  # 4: a failing command does not move the cwd
        Bash(f"mkdir {gone} && cd {gone} && rmdir {gone}"),  # 5: ends in a vanished directory
        Bash("pwd"),  # 6
        Bash(f"cd {outside} && pwd"),  # 7: outside the working directories
        Bash("pwd"),  # 8
    ]
    run = claude_env.run(project_dir, steps)
    out = run.tool_results()
    argv = out[0].content.split("\n")
    assert argv[:2] == ["/bin/bash", "-c"]
    script = argv[2]
    assert script.startswith("source ") and "/shell-snapshots/snapshot-bash-" in script
    assert " && eval '" + show.replace("'", "'\"'\"'") + "'" in script
    assert script.endswith("-cwd") and " && pwd -P >| " + str(claude_env.claude_tmpdir) in script
    pid, pgid, sid = out[0].content.split("\n")[-1].split()
    assert pid == pgid == sid  # every command is a session leader
    assert out[2].content == str(project_dir / "sub")
    assert out[4].content == str(project_dir / "sub")
    assert out[5].is_error and out[5].content.startswith("Exit code 1\n")
    assert "pwd: error retrieving current directory" in out[5].content
    assert out[6].content == str(project_dir / "sub")
    assert out[7].content == f"{outside}\nShell cwd was reset to {project_dir}"
    assert out[8].content == str(project_dir)
