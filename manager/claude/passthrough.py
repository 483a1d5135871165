"""Which Bash commands run outside the sandbox.

A command passes through only when every simple command in it does: its first
word is on the ``passthrough`` list (a bare name, never a path that could be
any program), no ``VAR=value`` prefix, no file redirection or heredoc, no
``$(...)``/backticks/process substitution, no subshell or compound syntax,
and none of the arguments that make a read-only command write or run others
(``find -delete``, ``find -exec``, ``rg --pre``, ``env CMD``...). When in doubt:
sandbox. The plugin's own ``bin/`` scripts are never wrapped.
"""

from __future__ import annotations

import os

from manager.claude import shell
from manager.claude.permissions import UNSAFE_ARGS

DEFAULT = ("git", "gh", "sudo", "docker", "podman")
# Read-only commands the design once passed through. Outside the sandbox they
# would show the real files, not the overlay's (a stale view after a sandboxed
# write), so they are sandboxed unless the user lists them in `passthrough`.
READ_ONLY = ("ls", "cat", "pwd", "grep", "rg", "find", "which", "env", "echo", "true",
             "false", "type", "command")
# Own scripts that change nothing or only act on the user's behalf after review.
OWN = "bin/workspace"


def is_own_script(script: shell.Script, plugin_root: str | None) -> bool:
    """Every part runs the plugin's own launcher (and nothing else is going on)."""
    if not plugin_root or not _plain(script):
        return False
    own = os.path.join(plugin_root, OWN)
    return all(p.words and p.words[0] == own and not p.file_redirect for p in script.parts)


def passes(script: shell.Script, allowed: list[str] | tuple[str, ...]) -> bool:
    if not _plain(script):
        return False
    return all(_part_passes(part, allowed) for part in script.parts)


def _plain(script: shell.Script) -> bool:
    return bool(script.parts) and not (script.substitution or script.compound
                                       or script.unterminated)


def _part_passes(part: shell.Part, allowed: list[str] | tuple[str, ...]) -> bool:
    words = part.words
    if part.file_redirect or not words or "/" in words[0] or words[0] not in allowed:
        return False
    if part.assignments:
        return False
    name, args = words[0], words[1:]
    if any(a.startswith(u) for a in args for u in UNSAFE_ARGS.get(name, ())):
        return False
    if name == "env" and any(not a.startswith("-") for a in args):
        return False                 # env CMD runs CMD
    # command CMD runs CMD
    return not (name == "command" and args[:1] not in (["-v"], ["-V"]))
