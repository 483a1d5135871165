"""The hooks as Claude Code runs them: the real launcher, payloads on stdin, the overlay engine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from manager import config
from manager.claude import state
from manager.session import store

from .conftest import REPO
from .conftest import Claude

pytestmark = pytest.mark.engine


def test_session_start_is_idempotent_and_records_the_client(claude: Claude) -> None:
    client = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        claude.env["CLAUDE_PID"] = str(client.pid)
        for source in ("startup", "startup", "resume", "compact"):
            answer = claude.start(source)
            assert answer.returncode == 0 and "copy-on-write sandbox" in \
                answer.spec["additionalContext"], answer
        session = store.load("sess-1")
        assert session.origin == "claude" and session.client_pid == client.pid
        assert session.client_start is not None
        assert [s.id for s in store.list_sessions()[0]] == ["sess-1"]
        assert "Nothing is pending" in answer.spec["additionalContext"]
    finally:
        client.kill()
        client.wait()


def test_rewrite_echoes_every_field_and_runs_in_the_sandbox(claude: Claude) -> None:
    claude.start()
    fields = {"description": "d", "timeout": 5000, "run_in_background": False,
              "dangerouslyDisableSandbox": True, "someFutureField": [1]}
    answer = claude.pre_bash("echo hi > made.txt && echo done", **fields)
    assert answer.decision == "allow"
    updated = answer.spec["updatedInput"]
    assert {k: v for k, v in updated.items() if k != "command"} == fields
    run = claude.shell(answer.command)
    assert (run.returncode, run.stdout) == (0, "done\n")
    assert not (claude.project / "made.txt").exists()
    status = subprocess.run([sys.executable, "-m", "manager", "status", "--json"],
                            cwd=claude.project, capture_output=True, text=True, check=True)
    assert [c["path"] for c in json.loads(status.stdout)["changes"]] == [
        str(claude.project / "made.txt")]


HOSTILE = [
    "echo 'single' \"double\" $'ansi\\tc' \\$HOME",
    "printf '%s\\n' \"it's\" 'say \"hi\"' '\\\\back'",
    "cat <<'EOF'\n$(not run) `nor this` 'q' \"dq\"\nEOF",
    "cat <<EOF\nexpanded: $((1+2))\nEOF",
    "x=$(echo sub); y=`echo tick`; echo \"$x $y\"",
    "echo line1\necho line2; echo line3",
    "echo héllo ✓ 日本語 🙂",
    "printf '\\x01\\x7f\\x1b[0m|' ; echo '\x01\x02\x1b[31m'",
    "echo '%s %d {} \\n' ; echo '}{'\"'\"'\"'\"",
    "echo a\\\nb",
    "for i in 1 2; do echo $i; done | tac",
    "echo $0 \"$#\"",
]


@pytest.mark.parametrize("command", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_commands_behave_as_unsandboxed(claude: Claude, command: str) -> None:
    claude.start()
    expected = subprocess.run(["/bin/bash", "-c", f"eval {_squote(command)}"],
                              capture_output=True, cwd=claude.project)
    run = claude.bash(command)
    assert (run.returncode, run.stdout) == (expected.returncode,
                                            expected.stdout.decode(errors="surrogateescape")), \
        run.stderr


def _squote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def test_very_long_command(claude: Claude) -> None:
    claude.start()
    payload = "x'y\"z" * 40000                       # 200 KB, quote-heavy
    run = claude.bash(f"printf %s '{payload.replace(chr(39), chr(39) + chr(92) + chr(39) * 2)}' "
                      "| wc -c")
    assert (run.returncode, run.stdout.strip()) == (0, str(len(payload)))


def test_exit_status_and_cwd_follow_the_client_rules(claude: Claude) -> None:
    claude.start()
    (claude.project / "real").mkdir()
    assert claude.bash("cd real && pwd").stdout.strip() == str(claude.project / "real")
    assert claude.cwd == str(claude.project / "real")        # the client followed
    run = claude.bash("cd .. && exit 3")
    assert run.returncode == 3 and claude.cwd == str(claude.project / "real")
    assert claude.bash("pwd").stdout.strip() == str(claude.project / "real")
    # a directory that exists only in the overlay: the sandbox remembers it
    assert claude.bash("mkdir -p only/here && cd only/here").returncode == 0
    assert claude.cwd == str(claude.project / "real")
    assert claude.bash("pwd").stdout.strip() == str(claude.project / "real/only/here")
    assert not (claude.project / "real" / "only").exists()
    # the client moved on its own (e.g. reset to the project): it wins
    claude.cwd = str(claude.project)
    assert claude.bash("pwd").stdout.strip() == str(claude.project)


def test_background_calls_run_and_do_not_move_the_cwd(claude: Claude) -> None:
    claude.start()
    answer = claude.pre_bash("mkdir -p bg && cd bg && echo $PWD > where", run_in_background=True)
    assert "finish.sh" not in answer.command
    assert claude.shell(answer.command).returncode == 0
    assert claude.bash("cat bg/where").stdout.strip() == str(claude.project / "bg")
    assert claude.bash("pwd").stdout.strip() == str(claude.project)


def test_passthrough_own_scripts_and_one_shot_bypass(claude: Claude) -> None:
    claude.start()
    assert claude.pre_bash("gh pr list").json == {}
    assert claude.pre_bash("git status").command.startswith("GIT_OPTIONAL_LOCKS=0 ")  # sandboxed
    assert claude.pre_bash(f"{REPO}/bin/workspace status").json == {}
    requoted = claude.pre_bash(f"{REPO}/bin/workspace  status\n")   # runs as judged
    assert requoted.json == {"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "updatedInput": {"command": f"{REPO}/bin/workspace status"}}}
    assert claude.pre_bash("ls").decision == "allow"                 # sandboxed by default
    state.arm_bypass("sess-1")
    answer = claude.pre_bash("touch outside.txt")
    assert "updatedInput" not in answer.spec and "outside the sandbox" in answer.json[
        "systemMessage"]
    assert claude.pre_bash("touch again.txt").decision == "allow"     # one shot only


def test_model_cannot_bypass_unless_configured(claude: Claude, ws: Any) -> None:
    claude.start()
    answer = claude.pre_bash("touch x", dangerouslyDisableSandbox=True)
    assert "updatedInput" in answer.spec
    env = dict(os.environ, CLAUDECODE="1")
    refused = subprocess.run([sys.executable, "-m", "manager", "passthrough", "--session",
                              "sess-1"], cwd=claude.project, env=env, capture_output=True,
                             text=True)
    assert refused.returncode == 1 and "refusing" in refused.stderr
    project_file = claude.project / ".workspace.yaml"
    project_file.write_text("plugin:\n  allow_model_bypass: true\n")    # not trusted: ignored
    assert "updatedInput" in claude.pre_bash("touch x", dangerouslyDisableSandbox=True).spec
    config.set_trust(project_file, True)                                 # the user's say-so
    assert "updatedInput" not in claude.pre_bash("touch x", dangerouslyDisableSandbox=True).spec


def test_permission_rules_are_judged_on_the_original(claude: Claude) -> None:
    claude.start()
    settings = claude.project / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"deny": ["Bash(rm:*)"],
                                                    "allow": ["Bash(make:*)"]}}))
    denied = claude.pre_bash("rm -rf build")
    assert denied.decision == "deny" and "Bash(rm:*)" in denied.spec["permissionDecisionReason"]
    claude.mode = "default"
    assert claude.pre_bash("make all").decision == "allow"
    asked = claude.pre_bash("cargo build")
    assert asked.decision == "ask" and "updatedInput" in asked.spec


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1, 2]", b'{"hook_event_name": 3}',
                                 b'{"session_id": "../x", "tool_name": "Bash", '
                                 b'"tool_input": {"command": "ls"}}',
                                 b'{"session_id": "s", "tool_name": "Bash", "tool_input": "ls"}',
                                 b'{"session_id": "s", "tool_name": "Bash", '
                                 b'"tool_input": {"command": 5}}',
                                 b"\xff\xfe garbage"])
def test_malformed_input_denies_with_exit_0(claude: Claude, raw: bytes) -> None:
    answer = claude.hook("PreToolUse", raw)
    assert answer.returncode == 0 and answer.decision == "deny", answer
    assert "workspace doctor" in answer.spec["permissionDecisionReason"]


def test_unknown_fields_are_ignored(claude: Claude, sample: Callable[[str], Any]) -> None:
    payload = sample("PreToolUse")
    payload.update(cwd=str(claude.project), brandNewField={"x": 1})
    payload["tool_input"]["alsoNew"] = True
    answer = claude.hook("PreToolUse", json.dumps(payload))
    assert answer.decision == "allow" and answer.spec["updatedInput"]["alsoNew"] is True


def test_corrupt_state_denies_naming_the_fix(claude: Claude) -> None:
    claude.start()
    (store.session_dir("sess-1") / "claude.json").unlink()
    (store.session_dir("sess-1") / "session.json").write_text("{corrupt")
    answer = claude.pre_bash("echo hi")
    assert answer.returncode == 0 and answer.decision == "deny"
    reason = answer.spec["permissionDecisionReason"]
    assert "session.json" in reason and "workspace doctor" in reason


def test_internal_error_denies(claude: Claude) -> None:
    claude.start()
    hot = store.session_dir("sess-1") / "claude.json"
    hot.write_text(json.dumps(dict(json.loads(hot.read_text()), project=None)))
    answer = claude.pre_bash("echo hi")
    assert answer.returncode == 0 and answer.decision == "deny"
    assert "internal error" in answer.spec["permissionDecisionReason"]


def test_post_tool_use_notices_a_command_that_is_not_ours(claude: Claude) -> None:
    claude.start()
    answer = claude.pre_bash("echo hi")
    ok = claude.hook("PostToolUse", {"tool_name": "Bash", "tool_use_id": "toolu_0001",
                                     "tool_input": {"command": answer.command},
                                     "tool_response": {"stdout": "hi"}})
    assert ok.json == {}
    claude.pre_bash("echo two")
    bad = claude.hook("PostToolUse", {"tool_name": "Bash", "tool_use_id": "toolu_0002",
                                      "tool_input": {"command": "echo two"}})
    assert "ran outside the sandbox" in bad.json["systemMessage"]
    assert "ran outside" in bad.spec["additionalContext"]
    unseen = claude.hook("PostToolUse", {"tool_name": "Bash", "tool_use_id": "toolu_9",
                                         "tool_input": {"command": "echo x"}})
    assert "never saw" in unseen.json["systemMessage"]


def test_a_calls_files_go_with_its_post_tool_use(claude: Claude) -> None:
    """The call's record and its report of the final directory stay until PostToolUse (the
    sandboxed call runs no rm); a long command's spilled script goes when the call ends."""
    claude.start()
    calls = store.session_dir("sess-1") / "calls"
    long = "echo " + "x" * 200_000 + " >/dev/null; cd sub"
    (claude.project / "sub").mkdir()
    answer = claude.pre_bash(long)
    spilled = [p for p in answer.command.split("'") if p.endswith(".sh") and "toolu_" in p]
    run = claude.shell(answer.command)
    assert run.returncode == 0 and run.cwd == str(claude.project / "sub"), run.stderr
    assert sorted(p.name for p in calls.iterdir()) == ["toolu_0001.cmd", "toolu_0001.cwd"]
    assert spilled and not Path(spilled[-1]).exists()
    done = claude.hook("PostToolUse", {"tool_name": "Bash", "tool_use_id": "toolu_0001",
                                       "tool_input": {"command": answer.command}})
    assert done.json == {} and list(calls.iterdir()) == []


def test_direct_edits_never_see_a_stale_view(claude: Claude) -> None:
    claude.start()
    target = claude.project / "README.txt"
    (claude.project / "gone.txt").write_text("real\n")
    assert claude.bash("echo sandboxed >> README.txt && rm gone.txt && echo n > new.txt") \
        .returncode == 0

    def pre(tool: str, path: Path, **extra: Any) -> Any:
        return claude.hook("PreToolUse", {"tool_name": tool, "permission_mode": "default",
                                          "tool_input": {"file_path": str(path), **extra}})

    read = pre("Read", target)
    assert read.decision == "allow"
    assert Path(read.spec["updatedInput"]["file_path"]).read_text() == "hello\nsandboxed\n"
    assert Path(pre("Read", claude.project / "new.txt").spec["updatedInput"]["file_path"]) \
        .read_text() == "n\n"
    assert pre("Read", claude.project / "gone.txt").decision == "deny"
    assert pre("Read", claude.project / "untouched").json == {}
    edit = pre("Edit", target, old_string="hello", new_string="bye")
    assert edit.decision == "deny" and "/workspace:commit" in edit.spec["permissionDecisionReason"]
    assert pre("MultiEdit", target, edits=[]).decision == "deny"
    # Write goes ahead; PostToolUse brings the new content into the sandbox
    assert pre("Write", target, content="written\n").json == {}
    target.write_text("written\n")
    post = claude.hook("PostToolUse", {"tool_name": "Write", "tool_input": {
        "file_path": str(target), "content": "written\n"}})
    assert post.json == {}, post
    assert claude.bash("cat README.txt").stdout == "written\n"


def test_session_end_releases_and_keeps_changes(claude: Claude) -> None:
    from manager.engines.overlay.engine import holder_pid

    claude.start()
    claude.bash("echo keep > kept.txt")
    sandbox = store.session_dir("sess-1") / "sandbox"
    assert holder_pid(sandbox) is not None
    assert claude.hook("SessionEnd", {"reason": "other"}).returncode == 0
    assert holder_pid(sandbox) is None
    answer = claude.start("resume")
    context = answer.spec["additionalContext"]
    assert "1 change is pending" in context and "kept.txt" in context
    assert claude.bash("cat kept.txt").stdout == "keep\n"


def test_clear_continues_the_same_sandbox(claude: Claude) -> None:
    claude.start()
    claude.bash("echo a > a.txt")
    claude.session_id = "sess-2"
    assert "1 change is pending" in claude.start("clear").spec["additionalContext"]
    assert claude.bash("cat a.txt").stdout == "a\n"
    assert not store.exists("sess-2")


def test_guardrails_absent_is_a_no_op(claude: Claude, sample: Callable[[str], Any]) -> None:
    for event, name in (("Stop", "Stop"), ("UserPromptSubmit", "UserPromptSubmit"),
                        ("SubagentStop", "Stop")):
        payload = dict(sample(name), hook_event_name=event)
        answer = claude.hook(event, json.dumps(payload))
        assert (answer.returncode, answer.stdout) == (0, "")


def test_passthrough_prompt_arms_the_bypass(claude: Claude) -> None:
    claude.start()
    answer = claude.hook("UserPromptSubmit", {"prompt": "/workspace:passthrough"})
    assert "once" in answer.spec["additionalContext"]
    assert state.bypass_armed("sess-1")


def test_bootstrap_denies_until_installed(tmp_path: Path, claude: Claude) -> None:
    root = tmp_path / "plugin"
    shutil.copytree(REPO / "bin", root / "bin")
    claude.env.update(CLAUDE_PLUGIN_ROOT=str(root), CLAUDE_PLUGIN_DATA=str(tmp_path / "data"),
                      PATH="/usr/bin:/bin", WORKSPACE_BOOTSTRAP_PYTHON=sys.executable)
    first = claude.pre_bash("echo hi")
    assert first.returncode == 0 and first.decision == "deny"
    assert "being installed" in first.spec["permissionDecisionReason"]
    read = claude.hook("PreToolUse", {"tool_name": "Read", "tool_input": {"file_path": "/x"}})
    assert (read.returncode, read.stdout) == (0, "")  # nothing to sandbox: normal flow
    start = claude.start()
    assert "being installed" in start.json["systemMessage"]
    deadline = time.time() + 60
    while time.time() < deadline and not (tmp_path / "data" / "install.failed").exists():
        time.sleep(0.2)
    # an empty plugin root cannot be installed: the hook says so, still denying
    failed = claude.pre_bash("echo hi")
    assert failed.decision == "deny" and "could not be installed" in \
        failed.spec["permissionDecisionReason"]


def test_an_interpreter_that_cannot_run_the_hook_still_denies(claude: Claude) -> None:
    # Exit codes other than 0 and 2 are Claude Code's non-blocking path: never let one out.
    claude.env.update(WORKSPACE_PYTHON="/bin/false")
    answer = claude.pre_bash("echo hi")
    assert answer.returncode == 0 and answer.decision == "deny"
    assert "could not run" in answer.spec["permissionDecisionReason"]


def test_read_rules_are_judged_on_the_original_path(claude: Claude) -> None:
    claude.start()
    assert claude.bash("echo s > secret.txt && echo s > asked.txt && echo s > plain.txt") \
        .returncode == 0
    settings = claude.project / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"deny": ["Read(secret.txt)"],
                                                    "ask": ["Read(/asked.txt)"]}}))

    def read(name: str) -> Any:
        return claude.hook("PreToolUse", {"tool_name": "Read", "permission_mode": "default",
                                          "tool_input": {"file_path": str(claude.project / name)}})

    denied = read("secret.txt")
    assert denied.decision == "deny" and "Read(secret.txt)" in \
        denied.spec["permissionDecisionReason"]
    asked = read("asked.txt")
    assert asked.decision == "ask" and "asked.txt" in asked.spec["permissionDecisionReason"]
    assert Path(asked.spec["updatedInput"]["file_path"]).read_text() == "s\n"
    assert read("plain.txt").decision == "allow"


def test_ask_shows_the_original_command(claude: Claude) -> None:
    claude.start()
    claude.mode = "default"
    asked = claude.pre_bash("cargo build --release")
    assert asked.decision == "ask"
    assert "`cargo build --release`" in asked.spec["permissionDecisionReason"]
    assert "in the sandbox" in asked.spec["permissionDecisionReason"]
    long = claude.pre_bash("echo " + "x" * 5000)
    assert len(long.spec["permissionDecisionReason"]) < 2200


def test_passthrough_still_obeys_the_users_rules(claude: Claude) -> None:
    claude.start()
    settings = claude.project / ".claude" / "settings.local.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"deny": ["Bash(git log:*)"],
                                                    "ask": ["Bash(docker ps:*)"]}}))
    assert claude.pre_bash("gh pr list").json == {}          # the client's own flow
    denied = claude.pre_bash("sudo git log")                   # a rule the client cannot see
    assert denied.decision == "deny" and "Bash(git log:*)" in \
        denied.spec["permissionDecisionReason"]
    asked = claude.pre_bash("sudo docker ps")
    assert asked.decision == "ask" and "updatedInput" not in asked.spec
    assert "outside the sandbox" in asked.spec["permissionDecisionReason"]
    asked = claude.pre_bash("sudo docker  'ps'")                 # asked for as it will run
    assert asked.decision == "ask" and asked.command == "sudo docker ps"
    assert "`sudo docker ps` outside the sandbox" in asked.spec["permissionDecisionReason"]
    state.arm_bypass("sess-1")
    assert claude.pre_bash("git log -1").decision == "deny"   # the one-shot bypass too


def test_the_model_cannot_run_the_launchers_mutating_commands(claude: Claude) -> None:
    claude.start()
    claude.bash("echo x > pending.txt")
    refused = claude.pre_bash(f"{REPO}/bin/workspace commit")
    assert refused.decision == "deny" and "/workspace:commit" in \
        refused.spec["permissionDecisionReason"]
    assert claude.pre_bash(f"{REPO}/bin/workspace hooks uninstall").decision == "deny"
    assert "updatedInput" in claude.pre_bash(f"{REPO}/bin/../bin/workspace commit").spec
    assert not (claude.project / "pending.txt").exists()
