"""A container's owners are reviewed as a command inside saw them (its recorded id maps), so
a change of owner alone is shown and committed as the same chown done natively (issue 21)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from manager import config
from manager.engines import registry
from manager.engines.container import ids as container_ids
from manager.session import store

pytestmark = [pytest.mark.engine, pytest.mark.as_user,
              pytest.mark.parametrize("engine_name", ["docker", "podman"], indirect=True)]


def test_an_owner_changed_inside_is_reviewed_and_committed(ws, project: Path, engine_name: str):
    """Root inside (here through the engine; an agent through any setuid tool of the image)
    gives a file another owner: review shows it, and commit leaves what that chown natively
    would (root gives it; an ordinary user, who cannot, is told it is theirs)."""
    ws("run", "--", "true", check=True)
    session = store.current(project)
    assert session is not None
    maps = container_ids.review_map(session.sandbox)
    assert maps is not None and maps.inside(os.getuid(), os.getgid()) == (os.getuid(), os.getgid())
    engine = registry.make(engine_name, config.load(None))
    engine.client.exec_root(engine.container_name(session),
                            ["chown", "1234:1235", str(project / "README.txt")])
    found = {c["path"]: c for c in json.loads(ws("status", "--json", check=True).stdout)["changes"]}
    readme = found.get(str(project / "README.txt"))
    assert readme is not None and (readme["kind"], readme["owner"]) == ("mode", "1234:1235"), found
    out = ws("commit", check=True)
    st = (project / "README.txt").stat()
    if os.geteuid() == 0:
        assert (st.st_uid, st.st_gid) == (1234, 1235)
    else:
        assert (st.st_uid, st.st_gid) == (os.getuid(), os.getgid())
        assert "committed as yours: inside it belongs to 1234:1235" in out.stdout + out.stderr
    assert json.loads(ws("status", "--json", check=True).stdout)["changes"] == []
