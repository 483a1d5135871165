"""A session's sandbox as review and commit see it: its pending changes, what is never
committed, and its upper layers held still."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from collections.abc import Iterator
from pathlib import Path

from manager.changes import model
from manager.changes import seen
from manager.changes.model import Change
from manager.changes.walkcache import WalkCache
from manager.engines.base import RunRequest
from manager.session import paths
from manager.session import store
from manager.session.context import Context
from manager.session.store import Session

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from manager.engines.base import Engine

REVIEW_CACHE = "review.cache"


def _work_dirs(session: Session) -> list[Path]:
    """Every work directory an overlay of the session was given (the overlay engine gives
    each its own; try's layout has the same directory)."""
    from manager.engines.overlay.holder.names import WORK

    try:
        return sorted((session.sandbox / WORK).iterdir())
    except OSError:
        return []


def _recorded_uppers(session: Session, layers: list[model.Layer]) -> list[Path]:
    """The uppers of every point the overlay engine's holders mounted an overlay at
    (holder/names.OVERLAID), over the layer of the host's root."""
    from manager.engines.overlay.holder.names import OVERLAID

    try:
        points = (session.sandbox / OVERLAID).read_bytes().split(b"\0")
    except OSError:
        return []
    roots = [layer.upper for layer in layers if layer.target == Path("/")]
    return [root / os.fsdecode(p).lstrip("/") for root in roots for p in dict.fromkeys(points) if p]


def _overlay_uppers(upper: Path) -> list[Path]:
    """The directories of ``upper`` an overlay of the session may have used as its upper: the
    upper itself, and each entry of the directories at or above a host mount point (the
    overlay and try engines mount one overlay per entry of such a directory, its upper the
    entry's in ``upper``; an entry no overlay used is probed in vain, never wrongly)."""
    from manager.engines.overlay.holder import mountinfo

    levels = {"/"}
    for point in mountinfo.points(mountinfo.read()):
        parts = point.strip("/").split("/")
        levels.update("/" + "/".join(parts[:i]) for i in range(len(parts) + 1))
    found = [upper]
    for level in sorted(levels):
        here = upper / level.lstrip("/")
        with contextlib.suppress(OSError):
            found += [here / name for name in os.listdir(here)]
    return list(dict.fromkeys(found))


def pending(ctx: Context, session: Session, summarize: int | None = None,
            on_found: Callable[[Change], None] | None = None) -> list[Change]:
    """The session's changes (see :func:`read_changes` for ``summarize`` and
    ``on_found``); what is unchanged since the last review is not read again
    (:mod:`manager.changes.walkcache`)."""
    engine = ctx.engine(session)
    engine.refresh(session)
    layers = engine.layers(session)
    header = (os.geteuid(), [(str(x.upper), str(x.target), repr(x.ids)) for x in layers])
    cache = WalkCache(str(session.dir / REVIEW_CACHE), header)
    over_real: dict[str, str] = {}
    found = model.read_changes(layers, session.project_path, summarize, cache, on_found,
                               over_real)
    cache.save()
    kept = kept_out(ctx)
    inside = paths.within_any(kept)
    seen.update(session.dir, {r: u for r, u in over_real.items() if not inside(r)})
    return reviewable(ctx, found, kept)


def reviewable(ctx: Context, found: list[Change], kept: list[str] | None = None) -> list[Change]:
    """The changes of ``found`` review shows: writes a sandboxed command made into
    workspace's own state, or where the sandbox hides the host's files (manager.hide), are
    never real changes, nor the mode of a directory above them. One rule, literal paths:
    review, and commit's check of what it applies against what review read, ask it.
    ``kept``: :func:`kept_out`, when the caller has it (it resolves ``hide``'s globs)."""
    kept = kept_out(ctx) if kept is None else kept
    inside = paths.within_any(kept)
    return [c for c in found if not inside(c.real_path) and not model.holds_a_mask(c, kept)]


def forget_review_cache(session: Session) -> None:
    """Make the next review read every entry (commit found one the last review did not
    show: a write through a mapping moves no time, so the cache could keep hiding it)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(session.dir / REVIEW_CACHE)


def kept_out(ctx: Context) -> list[str]:
    """Workspace's own state and what is hidden: never a change, nor the mode or owner of a
    directory above them (``model.holds_a_mask``)."""
    return [str(paths.state_home()), *_hidden(ctx)]


def _hidden(ctx: Context) -> list[str]:
    from manager import hide

    return hide.never_written(ctx.config, str(ctx.project))


# Engines whose overlays are mounted on this host over the session's uppers (the container
# engines' live in the engine's namespaces, their descriptors in its network namespace).
HOST_OVERLAYS = ("overlay", "try")


@contextlib.contextmanager
def upper_at_rest(ctx: Context, session: Session, *, unheld: bool = False) -> Iterator[list[model.Layer]]:
    """The session's upper layers, locked and with the engine stopped, so nothing
    changes them while they are applied or dropped (an upper dir must not change
    under a live overlay mount). ``unheld`` (commit): and no overlay of them lives on in a
    descriptor held outside the session (:func:`refuse_held`)."""
    engine = ctx.engine(session)
    with store.lock(session, timeout=ctx.config["commit.wait_seconds"]):
        engine.release(session)
        layers = engine.layers(session)
        if unheld and engine.name in HOST_OVERLAYS:
            refuse_held(session, layers)
        yield layers


def refuse_held(session: Session, layers: list[model.Layer]) -> None:
    """Nothing is applied while an overlay of the session's uppers lives on: a descriptor a
    command handed to a process outside the session writes the upper, and, once commit has
    renamed an upper entry into place, the real file (manager/fs/overlay_inuse.py)."""
    from manager.errors import WorkspaceError
    from manager.fs import overlay_inuse

    uppers = [upper for layer in layers for upper in _overlay_uppers(layer.upper)]
    uppers = list(dict.fromkeys([*uppers, *_recorded_uppers(session, layers)]))
    held = overlay_inuse.still_used(uppers, session.sandbox, _work_dirs(session))
    if held is None:   # an error, not a kernel without the mark (overlay in user namespaces has it)
        raise WorkspaceError(
            f"cannot tell whether a process outside session {session.id} still holds its "
            "sandbox open (the probe could not run: out of user or mount namespaces?); "
            "nothing was committed",
            hint="try again later; if it persists, see `workspace doctor`, or workspace discard --yes")
    if held:
        raise WorkspaceError(
            f"a process outside session {session.id} still holds its sandbox open (a descriptor "
            f"a command handed out, into {len(held)} of its overlays): it could write what "
            "commit applies, and the real files once they are in place; nothing was committed",
            hint="end that process (it may be another session's command), then commit again; "
                 "or workspace discard --yes")


def run(ctx: Context, session: Session, request: RunRequest,
        prepared: Callable[[Engine], None] | None = None) -> int:
    """Run ``request`` in the session's sandbox, preparing it first: the one way in.

    ``workspace run``, a rewind writing the view and the plugin's sync of a Write
    all come here; the streams are the request's (default: this process's stdio).
    ``prepared`` is called once the sandbox is prepared, under the session's lock.
    """
    engine = ctx.engine(session)
    with store.lock(session, shared=True, timeout=60):
        engine.prepare(session)
        if prepared is not None:
            prepared(engine)
        return engine.run(session, request)
