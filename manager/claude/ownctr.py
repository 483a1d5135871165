"""Passthrough docker/podman never acts on workspace's own containers, volumes or images.

A session's container is a sandbox (in volume mode it even holds ``CAP_SYS_ADMIN`` for its
overlay mount, dropped only for the calls the entry script makes): a command run on the
host that execs into it, stops, renames or removes it, joins its network, removes its
volume (the changes not exported yet) or replaces its image, acts on the sandbox from
outside. So a passthrough form that names a container, volume or image is checked against
the engine the command would talk to (the same client and environment, which resolves
names, ids and id prefixes as the command will): one that is workspace's (a label
``org.workspace.*``, or the image ``container.image`` names), one that cannot be told (a
name the engine says is missing is none, unless spelled ``workspace-…``), and every
``prune`` (it removes whatever is unused, ours too) are sandboxed instead.
Only docker/podman forms that name something pay for the lookup (one ``inspect`` each).
"""

from __future__ import annotations

import json
import subprocess

from manager.claude import policies

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.claude.policies
if TYPE_CHECKING:
    from manager.claude import shell

OUR_LABELS = "org.workspace."
CLIENTS = frozenset(("docker", "podman"))
# Subcommands whose operands are containers (``inspect``, ``ps`` only read; exec: its first).
CONTAINER_OPS = frozenset(("exec", "start", "stop", "restart", "kill", "rm", "pause", "unpause",
                           "wait", "rename", "diff", "logs", "top", "port", "stats", "attach",
                           "cp", "commit", "export", "update", "healthcheck", "mount", "unmount",
                           "checkpoint", "restore", "init", "cleanup"))
IMAGE_OPS = frozenset(("rmi", "tag", "push", "pull", "untag", "save", "load", "import"))
TIMEOUT = 10


def touches_own(script: shell.Script, image: str) -> bool:
    """A docker/podman part of ``script`` (already judged a passthrough form) acts on, or
    may act on, a container, volume or image of workspace's (``image``: container.image)."""
    for part in script.parts:
        words = _unsudo(part.words)
        if words[:1] and words[0] in CLIENTS and _own(words[0], words[1:], image):
            return True
    return False


def _unsudo(words: list[str]) -> list[str]:
    i = 1 if words[:1] == ["sudo"] else 0
    while i and i < len(words) and words[i] in policies.SUDO_OK_OPTIONS:
        i += 1
    return words[i:]


def _own(cli: str, args: list[str], image: str) -> bool:
    sub, rest = (args[0], args[1:]) if args else ("", [])
    group = ""
    if sub in policies.CTR_GROUPS and rest:
        group, sub, rest = sub, rest[0], rest[1:]
    if sub == "prune":
        return True
    if group == "network" and sub in ("connect", "disconnect"):   # NETWORK CONTAINER
        return _labelled(cli, "container", policies._operands(rest)[1:2])
    if group == "volume":
        return sub == "rm" and (_unnamed(rest, sub) or _labelled(
            cli, "volume", policies._operands(rest), "{{json .Labels}}"))
    if group == "image" or sub in IMAGE_OPS:
        return _own_image(cli, sub, policies._operands(rest), image)
    if sub in ("run", "create"):
        return any(_labelled(cli, "container", [net]) for net in _joined(rest))
    if group in ("", "container") and sub in CONTAINER_OPS:
        if _unnamed(rest, sub):
            return True
        names = policies._operands(rest)
        return _labelled(cli, "container", names[:1] if sub == "exec" else names)
    return False


# Options by which a form acts on containers (or volumes) it does not name: podman's
# --latest/-l (the one created last: the session's own, often), --all/-a. Judged as if they
# named ours.
UNNAMED_LONG = frozenset(("--latest", "--all"))
UNNAMED_SHORT = frozenset("la")


def _unnamed(args: list[str], sub: str) -> bool:
    """``args`` hold an option that picks targets without naming them. exec's options end
    at its container (what follows is the command's: `exec c ls -a`)."""
    for arg in _options(args) if sub == "exec" else args:
        if arg == "--":
            return False
        if arg.split("=", 1)[0] in UNNAMED_LONG:
            return True
        if arg.startswith("-") and not arg.startswith("--") and UNNAMED_SHORT & set(arg[1:]):
            return True
    return False


def _options(args: list[str]) -> list[str]:
    """The words before the first operand (an option's separate value skipped)."""
    found: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        arg = args[i]
        found.append(arg)
        i += 2 if policies.takes_value(arg) else 1
    return found


def _joined(args: list[str]) -> list[str]:
    """``--network container:NAME`` (and --net, --pod's ``container:``): the containers a new
    one would share a namespace with."""
    found = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name in ("--network", "--net", "--pod") and not eq and i + 1 < len(args):
            value = args[i + 1]
        elif name not in ("--network", "--net", "--pod"):
            continue
        if value.startswith("container:"):
            found.append(value.removeprefix("container:"))
    return found


def _labelled(cli: str, kind: str, names: list[str],
              fmt: str = "{{json .Config.Labels}}") -> bool:
    """Any of ``names`` is workspace's, or the engine cannot say. A name the engine reports
    missing is none (the command fails on it too), unless it is spelled as ours."""
    if not names:
        return False
    found = _inspect(cli, kind, names, fmt)
    if found is not None and len(found) == len(names):
        return any(_ours(labels) for labels in found)
    for name in names:   # one is missing, or the engine failed: one at a time
        one = _inspect(cli, kind, [name], fmt, missing_ok=True)
        if one is None or any(_ours(labels) for labels in one):
            return True
        if not one and name.startswith("workspace-"):
            return True
    return False


def _own_image(cli: str, sub: str, names: list[str], image: str) -> bool:
    """An image operand that is workspace's: labelled, or the image container.image names
    (by any of its names or its id). A name that is no image yet (pull, a new tag) is none."""
    if not names:
        return False
    ours = _inspect(cli, "image", [image], "{{.Id}}") if image else []
    our_ids = {str(i) for i in ours or []}
    for name in names:
        if image and name in (image, image.removesuffix(":latest")):
            return True
        found = _inspect(cli, "image", [name], "{{json .Id}} {{json .Config.Labels}}", raw=True)
        if found is None:
            if sub in ("pull", "tag", "import", "load"):
                continue   # not an image here: pulling or tagging it makes a new one
            return True
        for line in found:
            ident, _, labels = str(line).partition(" ")
            if _ours(_json(labels)) or _json(ident) in our_ids:
                return True
    return False


def _inspect(cli: str, kind: str, names: list[str], fmt: str, raw: bool = False,
             missing_ok: bool = False) -> list[object] | None:
    """One value per name; None when the engine does not answer for every one ([] for a
    name it says is missing, with ``missing_ok``)."""
    argv = [cli, kind, "inspect", "--format", fmt, "--", *names]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return [] if missing_ok and f"no such {kind}" in proc.stderr.lower() else None
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    return list(lines) if raw or fmt == "{{.Id}}" else [_json(line) for line in lines]


def _json(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _ours(labels: object) -> bool:
    return isinstance(labels, dict) and any(str(k).startswith(OUR_LABELS) for k in labels)
