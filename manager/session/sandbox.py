"""A session's sandbox as review and commit see it: its pending changes, what is never
committed, and its upper layers held still."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from collections.abc import Iterator

from manager.changes import model
from manager.changes import seen
from manager.changes.model import Change
from manager.changes.model import is_within
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
    # Writes a sandboxed command made into workspace's own state, or where the sandbox
    # hides the host's files (manager.hide), are never real changes.
    kept = [str(paths.state_home()), *_hidden(ctx)]
    inside = paths.within_any(kept)
    seen.update(session.dir, {r: u for r, u in over_real.items() if not inside(r)})
    return [c for c in found if not inside(c.real_path) and not _holds_a_mask(c, kept)]


def _holds_a_mask(change: Change, kept: list[str]) -> bool:
    """A directory above a hidden path whose only change is its mode or owner: the engine
    made it to hold the mask's mount point or whiteout (try and the container engines make
    it 0755; $HOME is often 0700), not the agent. Never shown, never applied."""
    if change.kind is not model.Kind.MODE or change.new_type is not model.EntryType.DIR:
        return False
    return any(is_within(k, change.real_path) and k != change.real_path for k in kept)


def never_committed(ctx: Context) -> list[str]:
    """The user's exclude patterns, workspace's own state and what is hidden (see ``pending``)."""
    return [*ctx.config["exclude"], str(paths.state_home()), *_hidden(ctx)]


def _hidden(ctx: Context) -> list[str]:
    from manager import hide

    return hide.never_written(ctx.config, str(ctx.project))


@contextlib.contextmanager
def upper_at_rest(ctx: Context, session: Session) -> Iterator[list[model.Layer]]:
    """The session's upper layers, locked and with the engine stopped, so nothing
    changes them while they are applied or dropped (an upper dir must not change
    under a live overlay mount)."""
    engine = ctx.engine(session)
    with store.lock(session, timeout=ctx.config["commit.wait_seconds"]):
        engine.release(session)
        yield engine.layers(session)


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
