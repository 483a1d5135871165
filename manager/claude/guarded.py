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
"""

from __future__ import annotations

import os

from manager.session import paths

CLAUDE_FILES = ("settings.json", "settings.local.json", "shell-snapshots", "plugins")


def roots(project: str) -> list[str]:
    from manager.claude import permissions

    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    claude = permissions.config_dir()
    home = os.path.expanduser("~")
    found = [paths.state_root(), os.path.join(xdg, "workspace"),
             os.path.join(xdg, "containers"), "/etc/containers",
             os.environ.get("DOCKER_CONFIG") or os.path.join(home, ".docker"),
             os.path.dirname(os.path.dirname(os.path.abspath(__file__))),   # the package
             "/etc/claude-code"]
    found += [os.path.join(claude, name) for name in CLAUDE_FILES]
    found += [os.path.join(project, ".claude", name) for name in CLAUDE_FILES[:2]]
    for var in ("CLAUDE_PLUGIN_ROOT", "CLAUDE_PLUGIN_DATA", "CONTAINERS_CONF"):
        if os.environ.get(var, "").startswith("/"):
            found.append(os.environ[var])
    return found


def _inside(path: str, root: str) -> bool:
    root = root.rstrip("/") or "/"
    return path == root or path.startswith(root + "/")


def protected(path: str, project: str) -> str | None:
    """The guarded root that ``path`` (as given, or through symlinks) falls in, or None."""
    seen = {os.path.normpath(path), os.path.realpath(path)}
    for root in roots(project):
        for candidate in {os.path.normpath(root), os.path.realpath(root)}:
            if any(_inside(p, candidate) for p in seen):
                return root
    return None
