"""Claude's own file tools against a sandbox that may hold a newer copy.

Read, Edit, Write, MultiEdit and NotebookEdit act on the real files from the
client process, not through Bash. Once a sandboxed command has changed a file,
the real file is stale for the agent and a direct edit would be invisible to
later commands. The rule, per tool, for a path the sandbox holds a copy of:

- Read: redirected to the sandbox's copy (read-only, so safe); a path the
  sandbox deleted is refused.
- Edit, MultiEdit, NotebookEdit: refused with the way out: edit it with a Bash
  command (that runs in the sandbox) or have the user commit it first.
- Write replaces the whole file: it goes ahead, and PostToolUse writes the new
  content into the sandbox through the engine, so both views agree.

Paths the sandbox never touched are left to the client as they are.
"""

from __future__ import annotations

import os
import stat

from manager.claude import protocol
from manager.claude.viewpath import opaque

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from typing import Any

    from manager.claude.permissions import Rule
    from manager.claude.records import Hot

READ = "Read"
REFUSED = ("Edit", "MultiEdit", "NotebookEdit")
WRITE = "Write"
TOOLS = (READ, WRITE, *REFUSED)


def target(tool_input: dict[str, Any]) -> str | None:
    path = tool_input.get("file_path") or tool_input.get("notebook_path")
    if isinstance(path, str) and path.startswith("/"):
        return os.path.normpath(path)
    return None


def sandbox_view(layers: list[list[str]], path: str) -> tuple[str, str] | None:
    """("copy", upper path) | ("deleted", upper path) when the sandbox differs; else None."""
    for upper, real in layers:
        if path != real and not path.startswith(real.rstrip("/") + "/"):
            continue
        rel = os.path.relpath(path, real)
        found = _lookup(upper, rel)
        if found is not None:
            return found
    return None


def _lookup(upper: str, rel: str) -> tuple[str, str] | None:
    parts = [] if rel == "." else rel.split("/")
    current = upper
    for i, name in enumerate(parts):
        current = os.path.join(current, name)
        try:
            st = os.lstat(current)
        except OSError:
            return None              # not in the upper layer: the real file shows through
        if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
            return "deleted", current
        last = i == len(parts) - 1
        if last:
            return "copy", current
        if stat.S_ISDIR(st.st_mode) and opaque(current):
            return "deleted", current   # a replaced directory hides the real one
    return None


def judge(tool: str, tool_input: dict[str, Any], hot: Hot,
          payload: dict[str, Any]) -> dict[str, Any]:
    path = target(tool_input)
    if path is None or tool == WRITE:
        return {}
    layers = hot.get("layers") or []
    view = sandbox_view(layers, path)
    if tool == READ:
        return _read(tool_input, path, view, layers, hot, payload)
    if view is None:
        return {}
    return protocol.deny(
        f"{path} has pending changes in the workspace sandbox, where Bash commands run, so "
        "the real file is not what they see and a direct edit would be lost to them. Edit it "
        "with a Bash command instead (e.g. a python or sed one-liner; it runs in the sandbox), "
        f"or ask the user to apply the sandbox's version first: /workspace:commit {path}")


def _read(tool_input: dict[str, Any], path: str, view: tuple[str, str] | None,
          layers: list[list[str]], hot: Hot, payload: dict[str, Any]) -> dict[str, Any]:
    """Redirected to the file the sandbox's view of ``path`` ends at, symlinks followed
    as the sandbox follows them, and judged on that file as well as on ``path``."""
    from manager.claude import viewpath

    if view is not None and view[0] == "deleted":
        return protocol.deny(f"{path} is deleted in the workspace sandbox, where Bash commands "
                             "run (pending the user's review); it no longer exists there.")
    found = viewpath.resolve(layers, path)
    if found is None:
        return protocol.deny(f"{path} is a symlink loop in the workspace sandbox.")
    if not found.through_upper:
        return {}                   # the sandbox shows the real file: the client reads it
    if found.host is None:
        return protocol.deny(f"{path} does not exist in the workspace sandbox, where Bash "
                             f"commands run (it leads to {found.target}, pending changes).")
    if os.path.isdir(found.host):
        return {}
    from manager.claude import readcopy

    try:
        handed = readcopy.take(hot["session"], found.host, [upper for upper, _ in layers])
    except (readcopy.NotReadable, OSError) as exc:
        return protocol.deny(f"workspace: cannot show the sandbox's version of {path}: {exc}; "
                             "read it with a Bash command (it runs in the sandbox)")
    updated = dict(tool_input, file_path=handed)
    via = f" (a symlink to {found.target} there)" if found.target != path else ""
    note = f"{path} has pending changes in the workspace sandbox{via}; Read shows that version."
    project = os.environ.get("CLAUDE_PROJECT_DIR") or hot.get("project") or "/"
    rules = [read_rule(p, project, payload) for p in dict.fromkeys((path, found.target))]
    for kind in ("deny", "ask"):
        rule = next((r for r in rules if r is not None and r.kind == kind), None)
        if rule is not None and kind == "deny":
            return protocol.deny(f"workspace: your {rule.source} say deny for {rule.text} "
                                 f"({path}{via})")
        if rule is not None:
            return protocol.pre_tool("ask", f"workspace: reads the sandbox's version of {path}"
                                            f"{via} (your {rule.source} say ask for {rule.text})",
                                     updated, note)
    # Reading inside the project needs no prompt; elsewhere the client decides on the copy.
    inside = [r is not None or p.startswith(project.rstrip("/") + "/")
              for p, r in zip(dict.fromkeys((path, found.target)), rules, strict=True)]
    allowed = all(inside) or payload.get("permission_mode") == "bypassPermissions"
    decision = "allow" if allowed else None
    return protocol.pre_tool(decision, note if decision else None, updated, note)


def read_rule(path: str, project: str, payload: dict[str, Any]) -> Rule | None:
    """The first of the user's Read rules (deny, then ask, then allow) for ``path``.

    The client would match them against the sandbox copy's path we redirect to,
    so they are judged here on the path Claude asked for.
    """
    from manager.claude import pathrules
    from manager.claude import permissions

    cwd = payload.get("cwd")
    cwd = cwd if isinstance(cwd, str) and cwd.startswith("/") else project
    rules = permissions.load_rules(project, "Read")
    for kind in permissions.KINDS:
        for rule in rules:
            if rule.kind == kind and pathrules.matches(rule.pattern, path, project, cwd):
                return rule
    return None
