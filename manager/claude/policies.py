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
- ``docker``/``podman``: operations of the daemon (or podman's own storage),
  with options from :data:`CTR_OPTIONS`; no global options, no volume or
  mount options, nothing whose client reads or writes local files.
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

CTR_READ = frozenset(("ps", "images", "logs", "inspect", "version", "info", "stats", "top",
                      "port", "history", "diff", "events", "search", "healthcheck"))
CTR_DAEMON = frozenset(("start", "stop", "restart", "kill", "rm", "rmi", "pull", "pause",
                        "unpause", "wait", "rename", "tag", "push"))
CTR_RUNS = frozenset(("run", "exec", "create"))   # options end at the image / container
CTR_GROUPS: dict[str, frozenset[str]] = {
    "container": frozenset(("ls", "list", "ps", "inspect", "logs", "top", "port", "stats",
                            "diff", "exists", "start", "stop", "restart", "kill", "rm",
                            "pause", "unpause", "wait", "rename", "prune", "run", "exec",
                            "create")),
    "image": frozenset(("ls", "list", "inspect", "history", "exists", "tree", "rm", "pull",
                        "prune", "tag", "push")),
    "network": frozenset(("ls", "list", "inspect", "exists", "create", "rm", "prune",
                          "connect", "disconnect")),
    "volume": frozenset(("ls", "list", "inspect", "exists", "create", "rm", "prune")),
    "system": frozenset(("df", "info", "events")),
    "pod": frozenset(("ps", "ls", "list", "inspect", "logs", "top", "stats", "exists", "start",
                      "stop", "restart", "kill", "rm", "pause", "unpause", "create")),
}
CTR_FLAGS = frozenset((
    "--rm", "--detach", "--interactive", "--tty", "--publish-all", "--init", "--read-only",
    "--quiet", "--replace", "--all", "--no-trunc", "--latest", "--size", "--digests",
    "--no-stream", "--follow", "--timestamps", "--details", "--force", "--attach",
    "--last", "--help", "--external", "--tree",
))
CTR_VALUES = frozenset((
    "--name", "--env", "--publish", "--workdir", "--entrypoint", "--user", "--hostname",
    "--label", "--restart", "--platform", "--pull", "--memory", "--cpus", "--network", "--net",
    "--add-host", "--dns", "--expose", "--stop-signal", "--stop-timeout", "--tmpfs", "--pod",
    "--health-cmd", "--detach-keys", "--shm-size", "--filter", "--format", "--tail", "--since",
    "--until", "--time", "--signal", "--type", "--driver", "--subnet", "--gateway", "--alias",
    "--limit", "--condition", "--timeout",
))
CTR_SHORT_FLAGS = frozenset("ditPqaflsn")          # bundles of these: -it, -dit, -aq
CTR_SHORT_VALUES = frozenset("epwuhlmfnts")        # -e VAL (never attached: -eVAL)

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
    if not args or args[0].startswith("-"):
        return False                  # -H/--context/--root/--url point it elsewhere
    sub, rest = args[0], args[1:]
    if sub in CTR_GROUPS:
        if not rest or rest[0] not in CTR_GROUPS[sub]:
            return False
        sub, rest = rest[0], rest[1:]
    elif sub not in CTR_READ | CTR_DAEMON | CTR_RUNS:
        return False
    if sub in CTR_RUNS:
        return _run_options_ok(rest) and (sub == "exec" or _image_operand_ok(rest))
    if not _options_ok(rest, CTR_FLAGS | CTR_VALUES, CTR_SHORT_FLAGS | CTR_SHORT_VALUES):
        return False
    return sub not in CTR_IMAGE_OPERANDS or all(
        image_reference(a) for a in _operands(rest))


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


def _operands(args: list[str]) -> list[str]:
    """The words that are not options or option values (as _options_ok reads them); after
    ``--`` every word is one."""
    found: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return found + args[i + 1:]
        if not arg.startswith("-") or arg == "-":
            found.append(arg)
        i += 2 if takes_value(arg) else 1
    return found


def takes_value(arg: str) -> bool:
    """A docker/podman option whose value is the next word (``--name X``, ``-u 0``)."""
    return (arg.startswith("--") and "=" not in arg and arg in CTR_VALUES) or (
        len(arg) == 2 and arg[0] == "-" and arg[1] in CTR_SHORT_VALUES - CTR_SHORT_FLAGS)


def _image_operand_ok(args: list[str]) -> bool:
    """``run``/``create``: the image (the first operand) is a registry reference or an id."""
    operands = _operands(args)
    return bool(operands) and image_reference(operands[0])


def _run_options_ok(args: list[str]) -> bool:
    """``run``/``exec``/``create``: options until the first operand (image or container),
    whose own arguments are the container's business."""
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg == "-":
            return True
        if arg == "--":
            return True
        name = arg.split("=", 1)[0]
        if arg.startswith("--"):
            if name in CTR_VALUES:
                i += 1 if "=" in arg else 2
                continue
            if name not in CTR_FLAGS:
                return False
        elif len(arg) == 2 and arg[1] in CTR_SHORT_VALUES - CTR_SHORT_FLAGS:
            i += 2
            continue
        elif not _short_ok(arg, frozenset("ditP")):
            return False
        i += 1
    return False                      # no image or container: let it fail in the sandbox


def sudo(args: list[str], inner: Callable[[list[str]], bool]) -> bool:
    i = 0
    while i < len(args) and args[i] in SUDO_OK_OPTIONS:
        i += 1
    rest = args[i:]
    return bool(rest) and not rest[0].startswith("-") and rest[0] != "sudo" and inner(rest)


POLICIES: dict[str, Callable[[list[str]], bool]] = {"git": git, "gh": gh, "docker": docker,
                                                    "podman": docker}
