"""docker/podman forms that may pass through: per subcommand and per engine, the options known.

A docker or podman command passes through only in a form listed here, with only the options
its subcommand's table lists for the engine, in the spelling that engine reads: the same letter
means different things across subcommands and engines (podman ``stop -f`` is ``--filter``,
``rm -f`` is ``--force``; docker ``logs -n`` takes a value, podman's is a flag). A form that
changes something names each target as an operand (which :mod:`manager.claude.ownctr`
resolves): no table of such a form holds an option that picks targets without naming them
(``--filter``, ``--all``, ``--latest``, ``--replace``, ``--depend``, ``--cidfile``, podman's
``network rm -f``, which removes the containers using the network), and ``prune`` is no form.
Read-only forms (``ps``, ``images``, ``events``...) may filter what they show. Anything not
listed (an option, a form, a bundle with an unknown letter, ``-eVAL``) is sandboxed.

``docker`` may be podman (its docker emulation), so a docker form passes only with options
that every engine having its subcommand reads alike (same table entry, same arity).
``tests/security/test_ctr_option_tables.py`` checks each table against the installed
engines' own ``--help``: every listed option exists there with the letter and arity given
here, and every option the engine has but the table leaves out is sandboxed.
"""

from __future__ import annotations

# A table: options separated by spaces, "x/--long" with its short letter, "--long=" when it
# takes a value (the next word, or after "="). Keys are the words typed after the program
# (aliases below); a form absent from an engine's dict is not that engine's.
_RUN = ("--rm d/--detach i/--interactive t/--tty P/--publish-all --init --read-only q/--quiet "
        "--name= e/--env= p/--publish= w/--workdir= --entrypoint= u/--user= h/--hostname= "
        "l/--label= --restart= --platform= --pull= m/--memory= --cpus= --network= --add-host= "
        "--dns= --expose= --stop-signal= --stop-timeout= --tmpfs= --health-cmd= "
        "--detach-keys= --shm-size=")
_EXEC = "d/--detach i/--interactive t/--tty --detach-keys= e/--env= u/--user= w/--workdir="
_SHARED = {   # the same in both engines
    "ps": "a/--all f/--filter= --format= n/--last= l/--latest --no-trunc q/--quiet s/--size",
    "images": "a/--all --digests f/--filter= --format= --no-trunc q/--quiet",
    "container inspect": "f/--format= s/--size",
    "image inspect": "f/--format=",
    "version": "f/--format=", "info": "f/--format=", "system info": "f/--format=",
    "top": "", "port": "", "history": "--format= H/--human --no-trunc q/--quiet",
    "events": "f/--filter= --format= --since= --until=",
    "system df": "--format= v/--verbose",
    "network ls": "f/--filter= --format= --no-trunc q/--quiet",
    "network inspect": "f/--format=", "volume inspect": "f/--format=",
    "volume ls": "f/--filter= --format= q/--quiet",
    "start": "a/--attach i/--interactive --detach-keys=", "kill": "s/--signal=",
    "pause": "", "unpause": "", "rename": "", "tag": "",
    "network connect": "--alias= --ip= --ip6=", "network disconnect": "f/--force",
    "run": _RUN, "create": _RUN.replace("d/--detach ", "").replace(" --detach-keys=", ""), "exec": _EXEC,
}
DOCKER: dict[str, str] = {
    **_SHARED,
    "logs": "--details f/--follow --since= n/--tail= t/--timestamps --until=",
    "inspect": "f/--format= s/--size --type=",
    "stats": "--format= --no-stream --no-trunc", "diff": "", "wait": "",
    "search": "f/--filter= --format= --limit= --no-trunc",
    "system events": "f/--filter= --format= --since= --until=",
    "network create": "d/--driver= --gateway= --internal --label= --subnet= --ip-range= --ipv6",
    "network rm": "f/--force", "volume create": "d/--driver= --label=", "volume rm": "f/--force",
    "stop": "s/--signal= t/--timeout=", "restart": "s/--signal= t/--timeout=",
    "rm": "f/--force", "rmi": "f/--force --no-prune",
    "push": "a/--all-tags q/--quiet", "pull": "a/--all-tags q/--quiet --platform=",
}
PODMAN: dict[str, str] = {
    **_SHARED,
    "ps": _SHARED["ps"] + " --noheading --sort=",
    "images": _SHARED["images"] + " --history --sort=",
    "logs": "--color f/--follow n/--names --since= --tail= t/--timestamps --until=",
    "inspect": "f/--format= s/--size t/--type=",
    "stats": "--format= --no-stream --no-trunc --no-reset i/--interval=", "diff": "--format=",
    "wait": "--condition= i/--interval=",
    "events": _SHARED["events"] + " --no-trunc",
    "search": "f/--filter= --format= --limit= --no-trunc --list-tags --compatible",
    "container exists": "", "image exists": "", "image tree": "--whatrequires",
    "network exists": "", "volume exists": "", "healthcheck run": "",
    "network ls": _SHARED["network ls"] + " --noheading",
    "volume ls": _SHARED["volume ls"] + " --noheading",
    "network create": ("d/--driver= --gateway= --internal --label= --subnet= --ip-range= --ipv6 "
                       "--disable-dns"),
    "network rm": "", "volume create": "--driver= l/--label=", "volume rm": "",
    "start": _SHARED["start"] + " --sig-proxy",
    "stop": "t/--time= i/--ignore", "restart": "t/--time=",
    "rm": "f/--force i/--ignore t/--time=", "rmi": "f/--force i/--ignore --no-prune",
    "push": "q/--quiet", "pull": "a/--all-tags q/--quiet --platform= --arch= --os= --variant=",
    "pod ps": ("f/--filter= --format= --no-trunc --noheading q/--quiet --ctr-ids --ctr-names "
               "--ctr-status --ns --sort="),
    "pod inspect": "f/--format=", "pod exists": "", "pod top": "",
    "pod logs": "--color f/--follow n/--names --since= --tail= t/--timestamps --until=",
    "pod stats": "--format= --no-stream --no-reset",
    "pod start": "", "pod stop": "t/--time= i/--ignore", "pod restart": "",
    "pod kill": "s/--signal=", "pod rm": "i/--ignore t/--time=", "pod pause": "",
    "pod unpause": "", "pod create": "n/--name= l/--label= p/--publish= h/--hostname=",
}
ENGINES = {"docker": DOCKER, "podman": PODMAN}
# Other spellings of a form: the groups' verbs and the lists' names.
ALIASES = {
    "container ls": "ps", "container list": "ps", "container ps": "ps", "image ls": "images",
    "image list": "images", "image history": "history", "image rm": "rmi", "image pull": "pull",
    "image push": "push", "image tag": "tag", "network list": "network ls",
    "volume list": "volume ls", "pod ls": "pod ps", "pod list": "pod ps",
    **{f"container {verb}": verb for verb in (
        "logs", "top", "port", "stats", "diff", "start", "stop", "restart", "kill", "rm",
        "pause", "unpause", "wait", "rename", "run", "exec", "create")},
}
GROUPS = frozenset(("container", "image", "network", "volume", "system", "pod", "healthcheck"))
# Whose options end at the first operand (the image or container): what follows is the
# command the container runs.
ENDS_AT_OPERAND = frozenset(("run", "create", "exec"))

# One table as read: option -> whether it takes a value (long "--x" and short "-x" alike).
Table = dict[str, bool]
_TABLES: dict[tuple[str, str], Table | None] = {}


def form(args: list[str]) -> tuple[str, list[str]] | None:
    """The form ``args`` (the words after the program) is in, and the words after it; None
    for no listed form (a global option first, an unknown subcommand or group verb)."""
    if not args or args[0].startswith("-"):
        return None                   # -H/--context/--root/--url point it elsewhere
    words = 2 if args[0] in GROUPS else 1
    key = ALIASES.get(" ".join(args[:words]), " ".join(args[:words]))
    if len(args) < words or not any(key in table for table in ENGINES.values()):
        return None
    return key, args[words:]


def table(cli: str, key: str) -> Table | None:
    """The options ``cli`` may give form ``key``: for docker, those every engine having the
    form reads alike (docker may be podman's emulation)."""
    if (cli, key) not in _TABLES:
        _TABLES[(cli, key)] = _table(cli, key)
    return _TABLES[(cli, key)]


def _table(cli: str, key: str) -> Table | None:
    engines = [ENGINES[cli]] if cli == "podman" else list(ENGINES.values())
    read = [_read(engine[key]) for engine in engines if key in engine]
    if not read:
        return None
    first, *others = read
    return {opt: value for opt, value in first.items()
            if all(other.get(opt) is value for other in others)}


def _read(spec: str) -> Table:
    found: Table = {}
    for item in spec.split():
        short, _, long = item.rpartition("/")
        value = long.endswith("=")
        found[long.removesuffix("=")] = value
        if short:
            found["-" + short] = value
    return found


def options_ok(cli: str, key: str, args: list[str]) -> bool:
    """Every option in ``args`` is in the form's table for ``cli`` (``--x``, ``--x=v``,
    ``-x v``, a bundle of short flags); a value option's value is never attached (``-eV``)."""
    known = table(cli, key)
    return known is not None and _scan(known, key, args) is not None


def operands(cli: str, key: str, args: list[str]) -> list[str]:
    """The words that are neither options nor their values, as the engine reads them (run,
    create, exec: the first, the image or container, and what follows it)."""
    known = table(cli, key)
    found = _scan(known, key, args) if known is not None else None
    return found if found is not None else [a for a in args if not a.startswith("-")]


def _scan(known: Table, key: str, args: list[str]) -> list[str] | None:
    """The operands, or None when an option is not in ``known`` (or not spelled as listed)."""
    found: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return found + args[i + 1:]
        if not arg.startswith("-") or arg == "-":
            if key in ENDS_AT_OPERAND:
                return found + args[i:]
            found.append(arg)
            i += 1
            continue
        step = _option(known, arg)
        if step is None:
            return None
        i += step
    return found


def _option(known: Table, arg: str) -> int | None:
    """How many words the option ``arg`` takes up (1 or 2), or None when it is not known."""
    if arg.startswith("--"):
        name, eq, _ = arg.partition("=")
        value = known.get(name)
        if value is None:
            return None
        return 2 if value and not eq else 1
    if len(arg) == 2 and known.get(arg):
        return 2                      # -e VALUE
    letters = ["-" + c for c in arg[1:]]
    return 1 if all(known.get(letter) is False for letter in letters) else None


# Variables passthrough may not copy from the host into a container (``-e NAME``, podman's
# ``--env 'NAME*'``): the names the container engines keep from calls (engines/container/
# enter.sh), matched in any case. A value the command gives itself (``-e NAME=VALUE``) is
# the agent's own.
SECRET_PARTS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "CREDENTIAL")
SECRET_PREFIXES = ("ANTHROPIC_", "AWS_", "AZURE_")


def copies_secret(cli: str, key: str, args: list[str]) -> bool:
    """A run/create/exec form copies a host variable named as a secret, or a glob of them
    (podman), into the container."""
    return key in ENDS_AT_OPERAND and any(
        _secret_copy(v) for v in option_values(cli, key, args, ("-e", "--env")))


def _secret_copy(value: str) -> bool:
    name, eq, _ = value.partition("=")
    if eq:
        return False
    upper = name.upper()
    return "*" in name or any(p in upper for p in SECRET_PARTS) or upper.startswith(
        SECRET_PREFIXES)


def option_values(cli: str, key: str, args: list[str], wanted: tuple[str, ...]) -> list[str]:
    """The values ``args`` give the options ``wanted`` (spelled as in the table: ``-e``,
    ``--env``), as the engine reads them."""
    known = table(cli, key) or {}
    found: list[str] = []
    i = 0
    while i < len(args) and args[i] != "--":
        arg = args[i]
        if not arg.startswith("-") or arg == "-":
            if key in ENDS_AT_OPERAND:
                break
            i += 1
            continue
        name, eq, attached = arg.partition("=")
        step = _option(known, arg) or 1
        if name in wanted and arg.startswith("--") and eq:
            found.append(attached)
        elif name in wanted and step == 2:
            found.append(args[i + 1] if i + 1 < len(args) else "")
        i += step
    return found
