"""Passthrough docker/podman never acts on workspace's own containers, volumes or images.

A session's container is a sandbox (in volume mode it even holds ``CAP_SYS_ADMIN`` for its
overlay mount, dropped only for the calls the entry script makes): a command run on the
host that execs into it, stops, renames or removes it, joins its network, removes its
volume (the changes not exported yet) or replaces its image, acts on the sandbox from
outside. So a passthrough form that names a container, volume or image is checked against
the engine the command would talk to (the same client and environment, which resolves
names, ids and id prefixes as the command will): one that is workspace's (a label
``org.workspace.*``, or an image a session may run: :mod:`manager.claude.ownimages`), one
that cannot be told (a
name the engine says is missing is none, unless spelled ``workspace-…``), and a form that
makes something named or labelled as ours are sandboxed instead. A form that would act on
targets it does not name (``--filter``, ``--all``, ``--latest``, ``prune``) never gets here:
:mod:`manager.claude.ctrforms` lists none, so such a line is sandboxed before any lookup;
operands are read with that module's tables, as the engine reads them.
Only docker/podman forms that name something pay for the lookup (one ``inspect`` each).
"""

from __future__ import annotations

import json
import re
import subprocess

from manager.claude import ctrforms
from manager.claude import ownimages
from manager.claude import policies

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.claude.policies
if TYPE_CHECKING:
    from manager.claude import shell

OUR_LABELS = "org.workspace."
CLIENTS = frozenset(("docker", "podman"))
# Forms whose operands are containers (``inspect``, ``ps`` only read; exec: its first).
CONTAINER_OPS = frozenset(("exec", "start", "stop", "restart", "kill", "rm", "pause", "unpause",
                           "wait", "rename", "diff", "logs", "top", "port", "stats",
                           "healthcheck run"))
IMAGE_OPS = frozenset(("rmi", "tag", "push", "pull"))
TIMEOUT = 10
NETWORK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")   # a network's name (none, bridge ...)


def touches_own(script: shell.Script, image: str, project: str = "") -> bool:
    """A docker/podman part of ``script`` (already judged a passthrough form) acts on, or
    may act on, a container, volume or image of workspace's (``image``: container.image;
    ``project``: where the devcontainer naming another is read)."""
    mine = ownimages.Mine(image, project)
    for part in script.parts:
        words = _unsudo(part.words)
        if words[:1] and words[0] in CLIENTS and _own(words[0], words[1:], mine):
            return True
    return False


def _unsudo(words: list[str]) -> list[str]:
    i = 1 if words[:1] == ["sudo"] else 0
    while i and i < len(words) and words[i] in policies.SUDO_OK_OPTIONS:
        i += 1
    return words[i:]


def _own(cli: str, args: list[str], mine: ownimages.Mine) -> bool:
    found = ctrforms.form(args)
    if found is None:
        return True                   # not a listed form: it did not pass (fail safe)
    key, rest = found
    names = ctrforms.operands(cli, key, rest)
    if key in ("network connect", "network disconnect"):   # NETWORK CONTAINER
        return _labelled(cli, "container", names[1:2])
    if (key.endswith(" create") or key in ("run", "create")) and _spelled_ours(
            cli, key, rest, names):
        return True
    if key == "volume rm":
        return _labelled(cli, "volume", names, "{{json .Labels}}")
    if key.startswith("image ") or key in IMAGE_OPS:
        return _own_image(cli, key.removeprefix("image "), names, mine)
    if key in ("run", "create"):
        return _outside_a_network(cli, key, rest) or _runs_unknown(cli, key, rest, names, mine) \
            or any(_labelled(cli, "container", [net]) for net in _joined(rest))
    if key in CONTAINER_OPS:
        return _labelled(cli, "container", names[:1] if key == "exec" else names)
    return False


def _spelled_ours(cli: str, key: str, args: list[str], names: list[str]) -> bool:
    """A form that makes something named ``workspace-…`` or labelled ``org.workspace.*``:
    workspace would take it for its own (a session's container, volume or network)."""
    made = ctrforms.option_values(cli, key, args, ("--name", "-n", "--label", "-l"))
    if key not in ("run", "create"):
        made += names[:1]             # volume/network create NAME (run's first is the image)
    return any(n.startswith(("workspace-", OUR_LABELS)) for n in made)


def _outside_a_network(cli: str, key: str, args: list[str]) -> bool:
    """A ``--network`` that is no network of the engine's: the host's namespace (``host``),
    one named by path (podman's ``ns:PATH``) or a user-mode stack with options
    (``slirp4netns:...``, ``pasta:...``). The overlay sandbox with ``network: open`` is on
    the host's network namespace, and an abstract unix socket there carries descriptors
    both ways: a container there, outside every sandbox, could receive one of the
    sandbox's and write it after review (attack pass 15). ``container:NAME`` is
    :func:`_joined`'s."""
    for value in ctrforms.option_values(cli, key, args, ("--network",)):
        if value.startswith("container:"):
            continue
        if value == "host" or not NETWORK_NAME.fullmatch(value):
            return True
    return False


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


def _own_image(cli: str, sub: str, names: list[str], mine: ownimages.Mine) -> bool:
    """An image operand that is workspace's: labelled, or an image a session may run (by any
    of its names, as the engine resolves them, or its id; when those cannot be told, every
    form that writes an image). A name that is no image yet (pull, a new tag) is none."""
    if not names:
        return False
    known = mine.names()
    if known is None and sub in ownimages.WRITES or any(mine.named(n) for n in names):
        return True
    our_ids = _ids(cli, known or [])
    if our_ids is None:
        return True
    for name in names:
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


def _ids(cli: str, images: list[str]) -> set[str] | None:
    """The ids of those of ``images`` that are here; None when the engine cannot say."""
    found = _inspect(cli, "image", images, "{{.Id}}") if images else []
    if found is None:   # one is missing (or the engine failed): one at a time
        each = [_inspect(cli, "image", [n], "{{.Id}}", missing_ok=True) for n in images]
        if any(one is None for one in each):
            return None
        found = [i for one in each for i in one or []]
    return {str(i) for i in found}


def _runs_unknown(cli: str, key: str, args: list[str], names: list[str],
                  mine: ownimages.Mine) -> bool:
    """A run/create whose container would carry labels workspace reads as its own (its
    image's: one inspect), or that may pull an image under a name a session may run."""
    if not names:
        return False
    policy = ownimages.pull_policy(ctrforms.option_values(cli, key, args, ("--pull",)))
    found = _inspect(cli, "image", names[:1], "{{json .Config.Labels}}", missing_ok=True)
    if found is None:
        return True
    if policy != "never" and mine.named(names[0]) and (policy != "missing" or not found):
        return True   # it would pull a session's image
    return any(ownimages.marks_container(labels) for labels in found)


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
