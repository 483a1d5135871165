"""Which images a passthrough docker/podman form must leave alone: every image a session may run.

A session runs ``container.image`` or the project's trusted devcontainer's image (a registry's,
unlabelled, or the ``workspace-devcontainer:<hash>`` its build is tagged with). Whatever names
it, it is workspace's own: a form run on the host that retags, pulls or removes an image under
such a name replaces what the next container runs (attack pass 7: ``docker tag EVIL
THAT-IMAGE``; in volume mode the image's entrypoint holds ``CAP_SYS_ADMIN``). The names are the
engine's own choice (:func:`manager.engines.container.image.runnable`, not a copy of it) and
are compared as the engines resolve them (``docker.io/library/``, ``localhost/``, ``:latest``).
When they cannot be computed (a devcontainer.json that does not parse) every form that writes
an image is sandboxed. ``run``/``create`` of an image labelled ``org.workspace.*`` (but the image
build's ``org.workspace.hash``) is sandboxed too: its container would carry labels workspace
reads as its own; so is one that may pull an image under a session's image's name.
"""

from __future__ import annotations

from manager.engines.container.refs import key
from manager.engines.container.refs import same_or_below

OUR_LABELS = "org.workspace."
# Repositories workspace builds into, whatever the tag: a devcontainer's build tag is the hash
# of inputs the agent knows, so a tag it plants before the user trusts that devcontainer
# would be "built once" already (attack pass 8).
OUR_REPOSITORIES = frozenset(("workspace-devcontainer", "workspace-sandbox", "workspace-base"))
IMAGE_MARK = "org.workspace.hash"   # manager/images/build.sh
# Passthrough forms (manager.claude.ctrforms) that write a local image by name.
WRITES = frozenset(("tag", "pull", "rmi"))


class Mine:
    """The images a session of ``project`` may run (``configured``: container.image),
    computed once, on first use."""

    def __init__(self, configured: str, project: str) -> None:
        self.configured = configured
        self.project = project
        self._names: list[str] | None = None
        self._done = False

    def names(self) -> list[str] | None:
        """Their names as configured; None when they cannot be told."""
        if not self._done:
            self._done, self._names = True, self._compute()
        return self._names

    def _compute(self) -> list[str] | None:
        if not self.project:
            return [self.configured] if self.configured else []
        from pathlib import Path

        from manager.engines.container import image
        from manager.errors import WorkspaceError

        try:
            return [n for n in image.runnable(self.configured, Path(self.project)) if n]
        except (WorkspaceError, OSError):
            return None

    def named(self, name: str) -> bool:
        """``name`` is one of them (or they cannot be told), or in a repository of
        workspace's own, whatever its tag (one a session may come to run)."""
        if repository(name).rsplit("/", 1)[-1] in OUR_REPOSITORIES:
            return True   # under any registry or namespace: podman resolves a short name there
        names = self.names()
        return names is None or any(same_or_below(name, n) for n in names)


def repository(name: str) -> str:
    """``name``'s repository as the engines resolve it, without tag or digest."""
    ref = key(name).partition("@")[0]
    head, colon, tag = ref.rpartition(":")
    return head if colon and "/" not in tag else ref


def marks_container(labels: object) -> bool:
    """Image labels that its containers would carry as workspace's marks (any
    ``org.workspace.*`` but the image build's own ``org.workspace.hash``, which workspace's
    images carry and no container is recognised by)."""
    return isinstance(labels, dict) and any(
        str(k).startswith(OUR_LABELS) and k != IMAGE_MARK for k in labels)


def pull_policy(values: list[str]) -> str:
    """The ``--pull`` a run/create gives (the last one counts; none: ``missing``)."""
    return values[-1].lower() if values else "missing"
