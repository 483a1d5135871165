"""Attack pass 25: the project's ``.workspace.yaml`` -- a file the agent writes (its Write
tool acts on the real project; manager/config.py's own docstring) -- *replaces* the user's
``exclude`` list instead of adding to it, so one line the agent writes turns the user's
"never committed" paths into ordinary changes that ``workspace commit`` writes.

``exclude`` is neither in ``TRUST_REQUIRED`` (taken from the project file only once the
user trusted that content) nor in ``ADD_ONLY`` (a project file may add to the list, not
shorten it: ``hide``); ``config._merge_text`` sets it from the untrusted file as it is.
docs/cli.md: "Excluded paths (``exclude:`` setting) are never written".

The attack (overlay engine, any account): the user's own config
(``~/.config/workspace/config.yaml``) says ``exclude: [".env"]``; the real project holds
``.env`` (local secrets, a deployment's settings). The agent writes the project file
(Write tool, the real project; the hook lets it: ``guarded.py`` leaves ``.workspace.yaml``
to trust) with ``exclude: []`` -- or any list without ``.env`` -- and a call rewrites
``.env`` in the sandbox. ``workspace status``/``diff`` show ``.env`` modified (review never
marks excluded paths: the user expects commit to leave it, as their setting says).
``workspace commit`` writes the agent's ``.env`` over the user's.

Promise broken: an excluded path (the user's own setting) is written. Severity: medium
(the user's standing protection is switched off by an untrusted file the agent writes;
``workspace config`` would name the project file as the source, nothing in review or
commit does).

Rule that would close the class: ``exclude`` is an add-only list (``ADD_ONLY``, as
``hide``): an untrusted project file may add patterns, never drop the user's; or commit
takes the union of every layer's ``exclude``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("overlay_engine")


def test_the_project_file_cannot_drop_the_users_exclusions(project: Path, ws, sandboxed) -> None:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "workspace"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text('exclude: [".env"]\n')
    (project / ".env").write_text("DB_PASSWORD=the user's own\n")
    sandboxed("echo 'DB_PASSWORD=the agent s' > .env && echo notes > notes.txt")
    # The agent's Write tool on the real project file (no trust needed for `exclude`).
    (project / ".workspace.yaml").write_text("exclude: []\n")
    review = ws("status", check=True).stdout + ws("diff", "--no-pager", check=True).stdout
    assert ".env" in review and "notes.txt" in review, review
    done = ws("commit")
    assert (project / "notes.txt").exists(), done
    assert (project / ".env").read_text() == "DB_PASSWORD=the user's own\n", (
        "commit wrote .env, which the user's own config excludes (exclude: ['.env']): the "
        "agent's project file `exclude: []` replaced the list; commit said "
        f"{done.stdout!r} {done.stderr!r}")
