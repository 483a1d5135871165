"""``hide`` (:mod:`manager.hide`) on the try engine: try's own ``-i PATH`` (main), which lays a
whiteout over each path in a layer of its own, so a command sees it absent.

try v0.2.0 has no ``-i``: a session that would have to hide something of the user's (the
``hide`` setting, Claude Code's denials) is refused with the reason. This project's own
state, which v0.2.0 cannot hide either, does not refuse it: try is no security boundary
(a command can leave its chroot, docs/security.md), and ``workspace doctor`` says so.
"""

from __future__ import annotations

import os

from manager import hide
from manager.config import Config
from manager.engines.try_.layout import OURS
from manager.engines.try_.probe import TryInfo
from manager.errors import EngineUnavailable
from manager.session.store import Session


def prepare(config: Config, session: Session, info: TryInfo) -> None:
    """The session's list for try_enter.sh; EngineUnavailable where this try cannot hide it."""
    listed = session.sandbox / OURS / hide.HIDE_FILE
    found = hide.targets(config, str(session.project))
    if info.flag != "-N":
        own = [os.path.realpath(p) for p in hide.always()]
        users = [t.path for t in found if not any(hide.within(t.path, o) for o in own)]
        if users:
            listed.unlink(missing_ok=True)   # without a list the entry prepares again: refused
            raise EngineUnavailable(
                f"try {info.version} cannot hide paths (it has no -i), and this session must "
                f"hide {', '.join(users[:3])}{' ...' if len(users) > 3 else ''}",
                hint="install try's main branch (scripts/setup.d/50-try.sh), or use the "
                     "overlay engine (`engine: overlay`)")
        found = []
    # try works in the session's sandbox, inside the state root: hidden around it.
    hide.write_list(listed.parent, hide.carve(found, os.path.realpath(session.sandbox)))
