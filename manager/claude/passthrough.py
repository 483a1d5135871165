"""Which Bash commands run outside the sandbox.

The ``passthrough`` setting names the commands that may; a command passes through
only when every simple command in it does: its first
word is on the ``passthrough`` list (a bare name, never a path that could be
any program), no ``VAR=value`` prefix, no file redirection or heredoc, no
``$(...)``/backticks/process substitution, no subshell or compound syntax,
nothing else bash would interpret (the line is :attr:`shell.Script.plain`:
no expansion, glob, brace, tilde, comment...; it then runs as
:func:`shell.requote` writes it from the words judged here), and none of the
arguments that make a read-only command write or run others (``find -delete``,
``find -exec``, ``rg --pre``, ``env CMD``...), and only in the exact forms
:mod:`manager.claude.policies` allows for it (git: none); while the ``network``
setting is not ``open``, none that can connect out (:mod:`manager.claude.netreach`).
When in doubt: sandbox.
The plugin's own launcher is never wrapped, but the model may only run its
read-only subcommands (requoted as well).
"""

from __future__ import annotations

import os

from manager.claude import policies
from manager.claude import shell
from manager.claude.permissions import UNSAFE_ARGS

# The default list is the `passthrough` setting's, in manager/config.py (one home).
# The plugin's launcher, and its subcommands that change nothing: the slash commands
# run it without a PreToolUse hook, so only the model's own calls come through here.
OWN = "bin/workspace"
OWN_READ_ONLY = frozenset(("status", "diff", "sessions", "doctor", "help"))


def own_script(script: shell.Script, plugin_root: str | None) -> str | None:
    """"run" when every part runs the plugin's launcher read-only (and the line is plain:
    it runs requoted), "refuse" when one would change something outside the sandbox
    (commit, discard, hooks...: the user's to do), or None when this is not (only) the
    launcher, or not plain (sandboxed)."""
    if not plugin_root or not script.parts:
        return None
    own = os.path.join(plugin_root, OWN)
    if not all(p.words and p.words[0] == own and not p.file_redirect for p in script.parts):
        return None
    if not all(_own_read_only(p.words[1:]) for p in script.parts):
        return "refuse"               # a refusal is safe however the line was misread
    return "run" if _plain(script) else None


def _own_read_only(args: list[str]) -> bool:
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return all(a in ("-h", "--help", "--version") for a in args)
    if words[0] == "passthrough":
        return args == ["passthrough", "--status"]
    return words[0] in OWN_READ_ONLY


def passes(script: shell.Script, allowed: list[str] | tuple[str, ...]) -> bool:
    if not _plain(script):
        return False
    return all(_part_passes(part, allowed) for part in script.parts)


def touches_workspace(script: shell.Script, image: str, project: str = "") -> bool:
    """A docker/podman part acts on workspace's own containers, volumes or images (asks
    the engine: :mod:`manager.claude.ownctr`); such a command is sandboxed."""
    if not any(w in ("docker", "podman") for p in script.parts for w in p.words):
        return False
    from manager.claude import ownctr

    return ownctr.touches_own(script, image, project)


def connects_out(script: shell.Script, network: object) -> bool:
    """``network`` (the effective setting) is not ``open`` and a part can reach the network
    (:mod:`manager.claude.netreach`): it runs in the sandbox, where the setting applies."""
    if network == "open":
        return False
    from manager.claude import netreach

    return any(netreach.connects_out(part.words) for part in script.parts)


# What a command running git gets in the sandbox (shell words, expanded by the client's
# shell). GIT_OPTIONAL_LOCKS=0: `git status` does not refresh .git/index (writes take
# their locks anyway). core.checkStat=minimal: `git diff` refreshes the index whatever
# that variable says, and from an ordinary account every file looks stat-dirty in the
# sandbox (the user namespace shows the user's files as root's, and git compares
# owners), so it would copy a rewritten .git/index into the sandbox on each call; with
# only mtime and size compared, files the sandbox did not touch look as they did. Put
# before any `git -c` the command gives, which git appends (and so wins).
GIT_ENV = ("GIT_OPTIONAL_LOCKS=0",
           "GIT_CONFIG_PARAMETERS=\"'core.checkstat=minimal'"
           "${GIT_CONFIG_PARAMETERS:+ $GIT_CONFIG_PARAMETERS}\"")


def runs_git(script: shell.Script) -> bool:
    """A part of the command line runs git: it runs in the sandbox with :data:`GIT_ENV`,
    so a read-only `git status` or `git diff` does not copy .git/index into the sandbox
    by refreshing it."""
    return any(p.argv[:1] == ["git"] for p in script.parts)


def _plain(script: shell.Script) -> bool:
    """Nothing in it for bash to interpret (see :mod:`manager.claude.shell`): what runs
    outside the sandbox is :func:`shell.requote` of what was judged here."""
    return bool(script.parts) and script.plain


def _part_passes(part: shell.Part, allowed: list[str] | tuple[str, ...]) -> bool:
    if part.file_redirect or part.assignments:
        return False
    return words_pass(part.words, allowed)


def words_pass(words: list[str], allowed: list[str] | tuple[str, ...]) -> bool:
    """A simple command's words (quotes removed) may run outside the sandbox."""
    if not words or "/" in words[0] or words[0] not in allowed:
        return False
    name, args = words[0], words[1:]
    if name == "sudo":
        return policies.sudo(args, lambda inner: words_pass(inner, allowed))
    if name in policies.POLICIES:
        return policies.POLICIES[name](args)
    if any(a.startswith(u) for a in args for u in UNSAFE_ARGS.get(name, ())):
        return False
    if name == "env" and any(not a.startswith("-") for a in args):
        return False                 # env CMD runs CMD
    # command CMD runs CMD
    return not (name == "command" and args[:1] not in (["-v"], ["-V"]))
