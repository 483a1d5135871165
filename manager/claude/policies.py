"""What a passthrough command may do outside the sandbox, per command.

Being on the ``passthrough`` list lets a command reach the real system, so
each known command passes only in forms that cannot write local files or run
other programs; everything else is sandboxed, where it still works (the
sandbox sees the real files plus its own changes), so a strict rule costs a
few milliseconds, never a broken command.

- ``git``: read-only inspection only, no global options but a few harmless
  ones. ``-c``/``-C``/``--git-dir``/``--exec-path`` could point git at
  configuration that runs commands (``alias.x=!cmd``, ``core.fsmonitor``,
  ``core.pager``), and a sandbox's files land on the real disk in its upper
  directory, so a repository the model wrote could be made to run them.
- ``gh``: the GitHub API; not aliases, extensions, configuration, nor the
  subcommands that clone, check out or download into the real filesystem.
- ``docker``/``podman``: daemon operations; not the ones whose client reads or
  writes local files (build context, compose files, ``cp``, ``save -o``...).
- ``sudo``: only in front of a command that passes through by itself.
- Any other listed command (``ls``, ``cat``...) as before: any arguments but
  the ones that make it write or run something.
"""

from __future__ import annotations

from collections.abc import Callable

GIT_GLOBAL_OK = frozenset(("--no-pager", "-P", "--no-optional-locks", "--literal-pathspecs",
                           "--no-replace-objects", "--glob-pathspecs", "--noglob-pathspecs",
                           "--icase-pathspecs"))
GIT_READ_ONLY = frozenset((
    "status", "log", "show", "diff", "shortlog", "blame", "annotate", "rev-parse", "rev-list",
    "ls-files", "ls-tree", "cat-file", "describe", "name-rev", "merge-base", "for-each-ref",
    "show-ref", "count-objects", "whatchanged", "check-ignore", "check-attr", "grep", "version",
    "show-branch", "cherry", "range-diff", "diff-tree", "diff-files", "diff-index", "ls-remote",
))
# Options that write a file or run a program: on any git subcommand, and per subcommand.
GIT_BAD_OPTIONS = ("--output", "--open-files-in-pager", "--upload-pack", "--ext-diff",
                   "--paginate", "--exec")
GIT_BAD_SHORT = {"grep": ("-O",), "ls-remote": ("-u",)}
BARE_LISTINGS = frozenset(("branch", "tag", "remote", "reflog"))
GIT_LISTINGS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    # subcommand: (listing positionals allowed as the first word, options that modify)
    "branch": (frozenset(), frozenset(("-d", "-D", "--delete", "-m", "-M", "--move", "-c",
                                       "-C", "--copy", "-f", "--force", "-u",
                                       "--set-upstream-to", "--unset-upstream",
                                       "--edit-description", "-t", "--track"))),
    "tag": (frozenset(), frozenset(("-d", "--delete", "-a", "--annotate", "-s", "--sign",
                                    "-f", "--force", "-m", "--message", "-F", "--file", "-u",
                                    "--local-user", "-e", "--edit"))),
    "remote": (frozenset(("show", "get-url")), frozenset()),
    "stash": (frozenset(("list", "show")), frozenset()),
    "worktree": (frozenset(("list",)), frozenset()),
    "reflog": (frozenset(("show",)), frozenset()),
    "config": (frozenset(("get", "list")), frozenset(("--add", "--unset", "--unset-all",
                                                      "--replace-all", "--edit", "-e",
                                                      "--rename-section", "--remove-section"))),
}
GIT_CONFIG_READS = ("--get", "--get-all", "--get-regexp", "--get-urlmatch", "--list", "-l")

GH_COMMANDS = frozenset((
    "pr", "issue", "repo", "api", "run", "workflow", "release", "auth", "search", "browse",
    "status", "label", "gist", "cache", "ruleset", "project", "secret", "variable", "org",
    "gpg-key", "ssh-key", "--version", "version", "--help", "help",
))
GH_WRITES_LOCALLY = frozenset(("checkout", "clone", "download", "fork", "sync", "set-default",
                               "setup-git", "develop"))

DOCKER_LOCAL_FILES = frozenset(("build", "buildx", "builder", "compose", "cp", "save", "load",
                                "import", "export", "context", "plugin", "trust", "manifest",
                                "play", "kube", "generate", "machine", "scp", "farm"))
DOCKER_BAD_OPTIONS = ("-o", "--output", "--env-file", "--cidfile", "--label-file",
                      "--iidfile", "--conmon-pidfile", "--pidfile")

SUDO_OK_OPTIONS = frozenset(("-n", "--non-interactive"))


def _split(args: list[str], global_ok: frozenset[str]) -> tuple[list[str], list[str]] | None:
    """(global options, the rest) when every option before the subcommand is harmless."""
    for i, arg in enumerate(args):
        if not arg.startswith("-"):
            return args[:i], args[i:]
        if arg not in global_ok:
            return None
    return args, []


def _has_option(args: list[str], options: tuple[str, ...] | frozenset[str]) -> bool:
    for arg in args:
        name = arg.split("=", 1)[0]
        if name in options:
            return True
        # bundled short options: `-fd` has -f and -d
        if len(name) > 2 and name[0] == "-" and name[1] != "-" and \
                any(f"-{c}" in options for c in name[1:]):
            return True
    return False


def git(args: list[str]) -> bool:
    split = _split(args, GIT_GLOBAL_OK)
    if split is None or not split[1]:
        return False
    sub, rest = split[1][0], split[1][1:]
    if _has_option(rest, GIT_BAD_OPTIONS + GIT_BAD_SHORT.get(sub, ())):
        return False
    if sub in GIT_READ_ONLY:
        return True
    if sub not in GIT_LISTINGS:
        return False                  # writes, or an alias that may run anything
    listings, modifying = GIT_LISTINGS[sub]
    if _has_option(rest, modifying):
        return False
    if sub == "config" and _has_option(rest, GIT_CONFIG_READS):
        return True
    positional = [a for a in rest if not a.startswith("-")]
    if not positional:
        return sub in BARE_LISTINGS   # `git stash` alone pushes; `git remote` lists
    if sub in ("branch", "tag"):      # a name creates one, unless listing
        return _has_option(rest, ("-l", "--list"))
    return positional[0] in listings


def gh(args: list[str]) -> bool:
    if not args or args[0] not in GH_COMMANDS:
        return False                  # a global flag first, an alias, extension or config
    words = [a for a in args if not a.startswith("-")]
    return not any(w in GH_WRITES_LOCALLY for w in words[:2])


def docker(args: list[str]) -> bool:
    words = [a for a in args if not a.startswith("-")]
    if not words or args[0].startswith("-"):
        return False                  # -H/--context/--config point it elsewhere
    if any(w in DOCKER_LOCAL_FILES for w in words[:2]):
        return False
    return not _has_option(args, DOCKER_BAD_OPTIONS)


def sudo(args: list[str], inner: Callable[[list[str]], bool]) -> bool:
    i = 0
    while i < len(args) and args[i] in SUDO_OK_OPTIONS:
        i += 1
    rest = args[i:]
    return bool(rest) and not rest[0].startswith("-") and rest[0] != "sudo" and inner(rest)


POLICIES: dict[str, Callable[[list[str]], bool]] = {"git": git, "gh": gh, "docker": docker,
                                                    "podman": docker}
