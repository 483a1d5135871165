"""Attack pass 24: a directory the sandbox replaced (opaque) deletes the user's excluded
files deeper below it.

``exclude`` promises "excluded paths are never written" (docs/cli.md; its own example is
``exclude: [".env", ...]``, a name at any depth). Commit's prune of an opaque directory
(``plan._plan_prune`` / ``_prune_one``) asks the exclusions only of each *immediate* real
child it removes; a child that is itself not excluded is removed whole, with everything
below it, excluded files included.

The attack (overlay engine, any account): the user's settings say ``exclude: [".env"]``;
the real project holds ``services/api/.env`` (the user's secrets) and
``services/api/main.py``. A call replaces the directory: ``rm -rf services && mkdir
services && echo ... > services/README.md`` (overlay makes the new upper ``services``
opaque; an agent "regenerating" a directory does exactly this). ``workspace status``:
``replaced: services/ (1 file)``; ``workspace diff``: ``services`` deleted with everything in
it, then added with ``README.md``; nothing says an excluded path goes. ``workspace commit``
removes the real ``services/api`` whole, ``.env`` with it. The same excluded file one level
up (``services/.env``) is kept ("excluded (still pending)"): the rule depends on the depth.

Promise broken: an excluded path is never written -- commit deletes it. Severity: major
(the user's own protection of a secret or local file is lost to one ordinary command;
nothing in review names it).

Rule that would close the class: a prune (and any recursive removal) walks what it removes
and asks the exclusions (the user's and workspace's ``Literal`` ones: hidden paths, state) of
every entry: a directory that holds an excluded entry is not removed whole (its other
entries are, the excluded kept, the directory incomplete), as ``_prune_one`` does for an
immediate child; or an Excluder's ``reaches`` decides when the walk is needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.usefixtures("overlay_engine")


def _real(project: Path) -> None:
    (project / ".workspace.yaml").write_text('exclude: [".env"]\n')
    api = project / "services/api"
    api.mkdir(parents=True)
    (api / ".env").write_text("API_KEY=the user's secret\n")
    (api / "main.py").write_text("print('api')\n")
    (project / "services/.env").write_text("TOP=also the user's\n")


def test_an_excluded_file_below_a_replaced_directory_is_not_deleted(
        project: Path, ws, sandboxed) -> None:
    _real(project)
    sandboxed("rm -rf services && mkdir services && echo regenerated > services/README.md")
    review = ws("status", check=True).stdout + ws("diff", "--no-pager", check=True).stdout
    assert "services" in review, review
    assert "api/.env" not in review, review   # review never names the excluded file
    done = ws("commit")
    assert (project / "services/README.md").exists(), done
    assert (project / "services/.env").exists(), done   # an immediate child: kept
    assert (project / "services/api/.env").exists(), (
        "commit deleted services/api/.env, an excluded path (exclude: ['.env']), with the "
        f"directory the sandbox replaced: review said {review!r}; commit said "
        f"{done.stdout!r} {done.stderr!r}")
    assert "excluded" in done.stdout and ".env" in done.stdout, done   # says what it kept


def test_an_excluded_file_below_a_deleted_directory_is_not_deleted(
        project: Path, ws, sandboxed) -> None:
    """The same class without an opaque directory: a deleted directory (a whiteout) is
    removed whole, excluded files below it with it."""
    _real(project)
    sandboxed("rm -rf services")
    review = ws("status", check=True).stdout + ws("diff", "--no-pager", check=True).stdout
    assert "services" in review, review
    done = ws("commit")
    assert (project / "services/api/.env").exists(), (
        "commit deleted services/api/.env, an excluded path (exclude: ['.env']), with the "
        f"directory the sandbox deleted: review said {review!r}; commit said "
        f"{done.stdout!r} {done.stderr!r}")
    assert "excluded" in done.stdout and ".env" in done.stdout, done   # says what it kept
