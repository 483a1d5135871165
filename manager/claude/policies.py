"""What a passthrough command may do outside the sandbox: an allowlist of exact forms.

Being on the ``passthrough`` list lets a command reach the real system, so each
known command passes only in the forms listed here, with only the options
listed here; anything else (an unknown option, an abbreviation, a bundle of
short options not all known, a global option) is sandboxed, where it still
works (the sandbox sees the real files plus its own changes), so a strict rule
costs a few milliseconds, never a broken command.

- ``git`` never passes: read-only git runs in the sandbox, so it shows the
  sandbox's changes, and whatever the repository's configuration names
  (``core.fsmonitor``, pagers, textconv, aliases...) can only run programs
  there. git also accepts any unambiguous prefix of a long option, which makes
  an allowlist of its options fragile.
- ``gh``: ``gh NOUN VERB`` for the listed read-only pairs (and ``api``), with
  options from :data:`GH_OPTIONS`. Not ``--web`` (runs a browser), aliases,
  extensions, anything that clones, checks out or downloads, a field read from a
  local file (``-F key=@FILE``) or another host (``--hostname``).
- ``docker``/``podman``: operations of the daemon (or podman's own storage), in
  the forms :mod:`manager.claude.ctrforms` lists, with the options its table gives
  that subcommand for that engine; a form that changes something names its targets
  (no filter, all, latest, replace); no global options, no volume or mount
  options, nothing whose client reads or writes local files, no host variable
  named as a secret copied into a container.
- ``sudo``: only in front of a command that passes through by itself.

gh, docker and podman parse options with pflag, which takes no abbreviations.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs the hook ~5 ms
if TYPE_CHECKING:
    from collections.abc import Callable


GH_FORMS: dict[str, frozenset[str]] = {
    "pr": frozenset(("list", "view", "status", "diff", "checks")),
    "issue": frozenset(("list", "view", "status")),
    "run": frozenset(("list", "view")),
    "workflow": frozenset(("list", "view")),
    "release": frozenset(("list", "view")),
    "repo": frozenset(("list", "view")),
    "label": frozenset(("list",)),
    "gist": frozenset(("list", "view")),
    "cache": frozenset(("list",)),
    "search": frozenset(("code", "commits", "issues", "prs", "repos")),
    "auth": frozenset(("status",)),
}
GH_ALONE = frozenset(("api", "status", "--version", "version"))
GH_OPTIONS = frozenset((
    "--json", "--jq", "--template", "--limit", "--state", "--author", "--assignee", "--label",
    "--search", "--base", "--head", "--repo", "--comments", "--branch", "--workflow",
    "--status", "--user", "--event", "--commit", "--created", "--log", "--log-failed",
    "--attempt", "--exit-status", "--verbose", "--job", "--name-only", "--patch", "--color",
    "--required", "--method", "--field", "--raw-field", "--header", "--paginate",
    "--slurp", "--include", "--silent", "--preview", "--draft", "--app", "--mention",
    "--milestone", "--archived", "--fork", "--source", "--visibility", "--language", "--topic",
    "--owner", "--sort", "--order", "--match", "--key", "--ref", "--all", "--exclude-drafts",
    "--exclude-pre-releases", "--files", "--raw", "--filename", "--public", "--secret",
    "--active", "--active-only",
))
GH_SHORT = frozenset("qtLsAalSBHRbuecvjiXFfp")     # never -w: --web on view commands
# A letter means what the form it is given to says: forms whose letters differ from the
# rest have their own lists (`auth status -t` is --show-token, the token hide keeps from
# sandboxed commands; elsewhere -t is --title or --template).
GH_FORM_OPTIONS: dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]] = {
    ("auth", "status"): (frozenset(("--active",)), frozenset("a")),
}

SUDO_OK_OPTIONS = frozenset(("-n", "--non-interactive"))


def _short_ok(arg: str, letters: frozenset[str]) -> bool:
    return len(arg) > 1 and arg[0] == "-" and arg[1] != "-" and all(c in letters for c in arg[1:])


def _options_ok(args: list[str], long: frozenset[str], short: frozenset[str]) -> bool:
    """Every option among ``args`` is a listed one (``--opt``, ``--opt=v``, short bundles)."""
    for arg in args:
        if arg == "--":
            return True
        if not arg.startswith("-") or arg == "-":
            continue
        if arg.startswith("--"):
            if arg.split("=", 1)[0] not in long:
                return False
        elif not _short_ok(arg, short):
            return False
    return True


def git(args: list[str]) -> bool:
    return False


def gh(args: list[str]) -> bool:
    if not args:
        return False
    if args[0] in GH_ALONE:
        rest, form = args[1:], (args[0], "")
    elif args[0] in GH_FORMS and len(args) > 1 and args[1] in GH_FORMS[args[0]]:
        rest, form = args[2:], (args[0], args[1])
    else:
        return False                  # a global flag first, an alias, extension, config...
    # `-F key=@FILE` (api, graphql) reads a local file, any file, and sends it: sandboxed.
    if any(a.startswith("@") or "=@" in a for a in rest):
        return False
    if any(_jq_reaches_out(q) for q in _jq_programs(rest)):
        return False
    return _options_ok(rest, *GH_FORM_OPTIONS.get(form, (GH_OPTIONS, GH_SHORT)))


# gh runs --jq programs with gojq and the process's environment (`env`, `$ENV`): outside the
# sandbox that is the client's, with the credentials the sandbox never sees. Modules
# (`import`, `include`) would read local files. Such a program runs in the sandbox.
JQ_REACHES = ("env", "ENV", "import", "include", "input")


def _jq_programs(args: list[str]) -> list[str]:
    found = []
    for i, arg in enumerate(args):
        if arg in ("--jq", "-q"):
            found.append(args[i + 1] if i + 1 < len(args) else "")
        elif arg.startswith("--jq="):
            found.append(arg[5:])
        elif arg.startswith("-") and not arg.startswith("--") and "q" in arg[1:]:
            found.append(arg[arg.index("q", 1) + 1:] or (args[i + 1] if i + 1 < len(args) else ""))
    return found


def _jq_reaches_out(program: str) -> bool:
    return any(word in program for word in JQ_REACHES)


def docker(args: list[str]) -> bool:
    return container("docker", args)


def podman(args: list[str]) -> bool:
    return container("podman", args)


def container(cli: str, args: list[str]) -> bool:
    """A form :mod:`manager.claude.ctrforms` lists, with only its options for ``cli``;
    images named only by registry reference or id; no host secret copied into a container."""
    from manager.claude import ctrforms

    found = ctrforms.form(args)
    if found is None:
        return False
    key, rest = found
    if not ctrforms.options_ok(cli, key, rest) or ctrforms.copies_secret(cli, key, rest):
        return False
    operands = ctrforms.operands(cli, key, rest)
    if key in ("run", "create"):      # the image; no image: let it fail in the sandbox
        return bool(operands) and image_reference(operands[0])
    if key == "exec":
        return bool(operands)
    return key not in CTR_IMAGE_OPERANDS or all(image_reference(a) for a in operands)


# Subcommands whose operands are image references. podman also reads and writes images
# through transports that name host paths (`push IMG oci-archive:~/.bashrc` wrote the real
# file; `docker-archive:x.pth` made a .pth of an image's bytes): outside the sandbox only a
# registry reference or an image id is allowed.
CTR_IMAGE_OPERANDS = frozenset(("pull", "push", "tag"))
TRANSPORTS = frozenset(("docker", "docker-archive", "docker-daemon", "oci", "oci-archive", "dir",
                        "containers-storage", "ostree", "sif", "tarball"))
_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789._-/")
_TAG_CHARS = _NAME_CHARS - {"/"} | frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")


def image_reference(ref: str) -> bool:
    """``[host[:port]/]name[/name...][:tag][@sha256:hex]``, or an image id: no transport,
    no path (a leading ``/``, ``.`` or ``~``), nothing else."""
    ref, _, digest = ref.partition("@")
    if digest and not (digest.startswith("sha256:") and len(digest) == 71
                       and all(c in "0123456789abcdef" for c in digest[7:])):
        return False
    host, slash, rest = ref.partition("/")
    if slash and ":" in host:             # a registry's port: host:5000/name
        host, _, port = host.partition(":")
        if not port.isdigit():
            return False
        ref = f"{host}/{rest}"
    name, _, tag = ref.partition(":")
    if name.split("/")[0] in TRANSPORTS or not name or name[0] in "/.~-":
        return False
    if not set(name) <= _NAME_CHARS or "//" in name or name.endswith("/"):
        return False
    return not tag or (set(tag) <= _TAG_CHARS and len(tag) <= 128 and tag[0] not in ".-")


def sudo(args: list[str], inner: Callable[[list[str]], bool]) -> bool:
    i = 0
    while i < len(args) and args[i] in SUDO_OK_OPTIONS:
        i += 1
    rest = args[i:]
    return bool(rest) and not rest[0].startswith("-") and rest[0] != "sudo" and inner(rest)


POLICIES: dict[str, Callable[[list[str]], bool]] = {"git": git, "gh": gh, "docker": docker,
                                                    "podman": podman}
