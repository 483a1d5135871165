"""PreToolUse: sandbox Bash calls; keep Claude's file tools from a stale view.

The hot path: one JSON read, a few stats and small files, no subprocess and
none of the package's heavier modules. Everything slower (creating a session,
reloading changed settings) happens only when the cached state says so.
"""

from __future__ import annotations

import os

from manager.claude import passthrough
from manager.claude import permissions
from manager.claude import protocol
from manager.claude import rewrite
from manager.claude import shell
from manager.claude import state
from manager.claude.protocol import HookInputError
from manager.session import paths

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any

    from manager.claude.records import Hot
    from manager.claude.records import HotConfig

BYPASS_NOTE = "workspace: this Bash call ran outside the sandbox (one-shot passthrough)"
OWN_REFUSED = ("workspace: only the user may do this (it changes what is outside the sandbox): "
               "ask them to run the matching /workspace: slash command, e.g. /workspace:commit")
ASK_SHOWN = 2000     # characters of the original command in an `ask` reason


def handle(payload: dict[str, Any]) -> dict[str, Any]:
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    if not isinstance(tool_input, dict):
        raise HookInputError("hook input field 'tool_input' is missing or not an object")
    claude_id = protocol.field(payload, "session_id")
    if not paths.valid_id(claude_id):
        raise HookInputError(f"unusable session_id {claude_id!r}")
    if tool != "Bash":
        from manager.claude import edits

        if tool not in edits.TOOLS:
            return {}
        guarded = _guarded(str(tool), tool_input, payload)
        if guarded is not None:
            return guarded
        session_id, hot = _session(claude_id, payload)
        return edits.judge(str(tool), tool_input, hot, payload)
    session_id, hot = _session(claude_id, payload)
    return bash(payload, tool_input, session_id, hot)


def _guarded(tool: str, tool_input: dict[str, Any],
             payload: dict[str, Any]) -> dict[str, Any] | None:
    """A refusal when a writing tool targets a file that controls the sandbox."""
    from manager.claude import edits
    from manager.claude import guarded

    path = tool_input.get("file_path") or tool_input.get("notebook_path")
    if tool == edits.READ or not isinstance(path, str) or not path:
        return None
    cwd = payload.get("cwd")
    project = os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()
    path = os.path.join(cwd if isinstance(cwd, str) and cwd.startswith("/") else project,
                        os.path.expanduser(path))
    why = guarded.refusal(path, project)
    if why is None:
        return None
    return protocol.deny(
        f"workspace: {why}; {tool} may not change it (it writes on the host, outside the "
        "sandbox). Make the change with a Bash command (it runs in the sandbox, where the "
        "user reviews it), or ask the user to make it themselves.")


def _session(claude_id: str, payload: dict[str, Any]) -> tuple[str, Hot]:
    session_id = state.resolve_session(claude_id)
    hot = state.read_hot(session_id)
    if hot is None:
        from manager.claude import sessions

        hot = sessions.ensure(session_id, payload)
    return session_id, hot


def _config(session_id: str, hot: Hot) -> HotConfig:
    from manager.claude import hotconfig

    config, reloaded = hotconfig.current(hot, hot["project"])
    if reloaded:
        state.write_hot(session_id, hot)
        from pathlib import Path

        from manager.egress import launch  # setting `network` may have changed with them

        launch.mark_if_changed(Path(paths.session_root(session_id)) / "sandbox", hot["project"])
    return config


def bash(payload: dict[str, Any], tool_input: dict[str, Any], session_id: str,
         hot: Hot) -> dict[str, Any]:
    command = tool_input.get("command")
    if not isinstance(command, str):
        raise HookInputError("tool_input.command is missing or not a string")
    call_id = payload.get("tool_use_id")
    if not paths.valid_id(call_id):
        call_id = "call-" + os.urandom(8).hex()
    config = _config(session_id, hot)
    script = shell.parse(command)
    project = os.environ.get("CLAUDE_PROJECT_DIR") or hot["project"]
    unwrapped = _unwrapped(command, script, tool_input, session_id, config, project)
    if unwrapped is not None:
        spec = unwrapped.get("hookSpecificOutput", {})
        if spec.get("permissionDecision") != "deny":
            state.record_call(session_id, call_id,
                              spec.get("updatedInput", {}).get("command", command))
        return unwrapped
    mode = str(payload.get("permission_mode") or "default")
    verdict = permissions.judge(command, script, mode, permissions.load_rules(project))
    if verdict.decision == "deny":
        return protocol.deny(f"workspace: {verdict.reason}")
    env = passthrough.GIT_ENV if passthrough.runs_git(script) else ()
    new = _rewritten(payload, tool_input, session_id, hot, call_id, command, env)
    state.record_call(session_id, call_id, new)
    reason = ask_reason(command, verdict.reason) if verdict.decision == "ask" else verdict.reason
    return protocol.pre_tool(verdict.decision, reason, dict(tool_input, command=new))


def ask_reason(command: str, why: str, where: str = "in the sandbox") -> str:
    """What the user approves: the prompt itself shows only the wrapped command."""
    shown = command.strip()
    if len(shown) > ASK_SHOWN:
        shown = shown[:ASK_SHOWN] + f"… ({len(command)} characters in all)"
    return f"workspace: runs `{shown}` {where} ({why})"


def _unwrapped(command: str, script: shell.Script, tool_input: dict[str, Any],
               session_id: str, config: HotConfig, project: str) -> dict[str, Any] | None:
    """The answer for a call that runs outside the sandbox, or None to sandbox it."""
    if not command:
        return {}      # nothing to run; anything else is sandboxed or denied, even a
        # line of characters that str.strip() would remove but bash would not
    own = passthrough.own_script(script, os.environ.get("CLAUDE_PLUGIN_ROOT"))
    if own == "run":
        return _left(command, shell.requote(script), tool_input, None)
    if own == "refuse":
        return protocol.deny(OWN_REFUSED)
    if state.take_bypass(session_id):      # the user's one-shot: their command as written
        return _outside(command, script, project, tool_input, BYPASS_NOTE, judged=False)
    if tool_input.get("dangerouslyDisableSandbox") is True and config["plugin.allow_model_bypass"]:
        return _outside(command, script, project, tool_input,
                        BYPASS_NOTE + " (dangerouslyDisableSandbox)", judged=False)
    if passthrough.passes(script, config["passthrough"]) and \
            not passthrough.connects_out(script, config.get("network")) and \
            not passthrough.touches_workspace(script, config.get("container.image", ""),
                                              project):
        return _outside(command, script, project, tool_input, None, judged=True)
    return None


def _outside(command: str, script: shell.Script, project: str, tool_input: dict[str, Any],
             notice: str | None, judged: bool) -> dict[str, Any]:
    """A call that runs outside the sandbox. The client judges the command itself, but not
    the command behind a wrapper (`sudo rm` for a rule on `rm`), so the user's deny and ask
    rules are applied here too. A ``judged`` one runs as the words judged, requoted."""
    verdict = permissions.by_rule(command, script, permissions.load_rules(project))
    if verdict is not None and verdict.decision == "deny":
        return protocol.deny(f"workspace: {verdict.reason}")
    line = shell.requote(script) if judged else command
    reason = None if verdict is None else ask_reason(line, verdict.reason, "outside the sandbox")
    answer = _left(command, line, tool_input, reason)
    if notice:
        answer["systemMessage"] = notice
    return answer


def _left(command: str, line: str, tool_input: dict[str, Any],
          ask: str | None) -> dict[str, Any]:
    """Let the client run ``line`` unsandboxed (asking the user first with reason ``ask``).
    For a judged call ``line`` is written back from the judged words (:func:`shell.requote`),
    so that bash runs what was judged whatever the judge misread; when it is the agent's
    line already, the answer leaves it as it is (the client's allow rules then match it)."""
    updated = None if line == command else dict(tool_input, command=line)
    if ask is None and updated is None:
        return {}
    return protocol.pre_tool("ask" if ask else None, ask, updated)


def _rewritten(payload: dict[str, Any], tool_input: dict[str, Any], session_id: str,
               hot: Hot, call_id: str, command: str, env: tuple[str, ...]) -> str:
    hook_cwd = payload.get("cwd")
    if not isinstance(hook_cwd, str) or not hook_cwd.startswith("/"):
        hook_cwd = os.getcwd()
    cwd = rewrite.choose_cwd(hook_cwd, state.read_cwd(session_id))
    if cwd != hook_cwd:   # the command's own report: a hint, never a reason not to run
        env = (*env, f"{rewrite.CWD_ELSE}={rewrite.quote(hook_cwd)}")
    background = tool_input.get("run_in_background") is True
    return rewrite.build(_entry(session_id, hot), paths.session_root(session_id), call_id,
                         command, cwd, background, os.path.realpath(paths.state_root()), env)


def _entry(session_id: str, hot: Hot) -> rewrite.Entry:
    entry, entry_bg = hot.get("entry"), hot.get("entry_bg")
    if entry and entry_bg:
        return rewrite.templated(entry, entry_bg)
    # An engine whose entry embeds the command in a larger argument: ask it per call.
    from manager.claude import sessions

    return lambda command, cwd, out: sessions.entry_argv(session_id, command, cwd, out)
