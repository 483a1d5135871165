"""The files that decide whether and how Bash calls are sandboxed.

Claude's Write, Edit, MultiEdit and NotebookEdit tools act on the real
filesystem from the client, outside the sandbox. Writing one of these files
would let the agent switch the sandbox off for the next call: the plugin's
state (hot config cache, engine entry, the one-shot bypass marker, the trust
record), the user's workspace configuration, the plugin and package code the
hooks run, and Claude Code's settings that define hooks and permissions (and
the shell snapshot the client sources before each command), and the
configuration through which a passthrough command would run a program on the
host (podman's containers.conf names conmon, runtimes and OCI hooks; docker's
config.json names credential helpers and CLI plugin directories). So the PreToolUse
hook refuses those tools on them; the user changes them. The project's
``.workspace.yaml`` is not here: what it may set is decided by trust (see
:mod:`manager.config`).

Beyond that list, :func:`refusal` lets those tools write only inside the project:
anything else (shell start-up files, ~/.gitconfig, ~/.local/bin, the interpreter that
runs the hooks) would run later on the host, where no sandbox is. Inside the project,
git's own data (``.git``: its config and hooks name programs) and the venv that runs
the hooks are refused too.
"""

from __future__ import annotations

import os

from manager.session import paths
from manager.session.paths import is_within as _inside

CLAUDE_FILES = ("settings.json", "settings.local.json", "shell-snapshots", "plugins")
# Project files through which Claude Code runs programs: its settings, hooks, commands
# and agents, and the MCP servers it starts.
PROJECT_FILES = (".claude", ".mcp.json")
# Where the client itself has the Write tool put files outside the project (plan mode).
CLIENT_OUTSIDE = ("plans",)


def roots(project: str) -> list[str]:
    from manager.claude import permissions

    claude = permissions.config_dir()
    home = os.path.expanduser("~")
    found = [paths.state_root(), paths.config_root(),
             os.path.join(paths.config_base(), "containers"), "/etc/containers",
             os.environ.get("DOCKER_CONFIG") or os.path.join(home, ".docker"),
             os.path.dirname(os.path.dirname(os.path.abspath(__file__))),   # the package
             "/etc/claude-code"]
    found += [os.path.join(claude, name) for name in CLAUDE_FILES]
    found += [os.path.join(project, name) for name in PROJECT_FILES]
    found += _interpreter()
    for var in ("CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA", "CONTAINERS_CONF"):
        if os.environ.get(var, "").startswith("/"):
            found.append(os.environ[var])
    return found


def _interpreter() -> list[str]:
    """The Python running this hook: its prefix, and the venv its executable is in
    (``python -I -S`` leaves sys.prefix at the base interpreter's)."""
    import sys

    found = [sys.prefix]
    venv = os.path.dirname(os.path.dirname(sys.executable))
    if os.path.exists(os.path.join(venv, "pyvenv.cfg")):
        found.append(venv)
    return found


def protected(path: str, project: str) -> str | None:
    """The guarded root that ``path`` (as given, or through symlinks) falls in, or None."""
    seen = {os.path.normpath(path), os.path.realpath(path)}
    for root in roots(project):
        for candidate in {os.path.normpath(root), os.path.realpath(root)}:
            if any(_inside(p, candidate) for p in seen):
                return root
    return None


def refusal(path: str, project: str) -> str | None:
    """Why Write/Edit/MultiEdit/NotebookEdit may not change ``path`` (absolute), or None.

    Judged on the path as given and as the kernel resolves it (symlinks, then ``..``;
    a part that does not exist yet is taken as written): every form must be inside
    the project, outside its ``.git`` and the guarded roots, and not hard-linked.
    """
    root = protected(path, project)
    if root is not None:
        return f"{path} is part of what keeps Bash calls sandboxed ({root})"
    lexical = os.path.normpath(path)
    resolved = {os.path.realpath(path), os.path.realpath(lexical)}
    top, real_top = os.path.normpath(project), os.path.realpath(project)
    if _client_outside(resolved):
        return None
    if not (_inside(lexical, top) or _inside(lexical, real_top)) \
            or not all(_inside(p, real_top) for p in resolved):
        return (f"{path} is outside the project ({project}); a file there could run later "
                "on the host, outside the sandbox")
    rel = [p[len(real_top):] for p in resolved]
    rel.append(lexical[len(top if _inside(lexical, top) else real_top):])
    if any(".git" in r.split("/") for r in rel):
        return f"{path} is git's own data (its config and hooks name programs the host runs)"
    home = _home_entry(resolved, project)
    if home is not None:
        return f"{path} is in {home}, the user's own configuration"
    return _linked(resolved)


def _client_outside(resolved: set[str]) -> bool:
    from manager.claude import permissions

    claude = os.path.realpath(permissions.config_dir())
    return all(any(_inside(p, os.path.join(claude, d)) for d in CLIENT_OUTSIDE)
               for p in resolved)


def _home_entry(resolved: set[str], project: str) -> str | None:
    """The hidden entry of $HOME (~/.bashrc, ~/.local, ~/.gitconfig...) a path is in,
    unless the project itself is inside it (a dotfiles repository)."""
    home = os.path.realpath(os.path.expanduser("~"))
    for path in resolved:
        if _inside(path, home) and path != home:
            entry = os.path.join(home, path[len(home) + 1:].split("/")[0])
            if entry.rsplit("/", 1)[1].startswith(".") \
                    and not _inside(os.path.realpath(project), entry):
                return entry
    return None


def _linked(resolved: set[str]) -> str | None:
    import stat

    for path in resolved:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
            return f"{path} is hard-linked: writing it changes a file elsewhere as well"
    return None
