"""State made by the release before formats, read, committed and rewound by this one."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from tests.upgrade.old_release import REPO
from tests.upgrade.old_release import changes
from tests.upgrade.old_release import cli
from tests.upgrade.old_release import commit_killed
from tests.upgrade.old_release import env_for

NEW = REPO
# Added, modified and deleted files, and an opaque directory (replaced wholesale).
WORK = ("echo added > added.txt; echo 'line 2' >> mod.txt; rm del.txt; "
        "rm -r opq; mkdir opq; echo fresh > opq/new.txt")
OUTSIDE = '; echo outside > "$HOME/outside.txt"'   # engines that overlay the whole system
SYSTEM_ENGINES = ("overlay", "try")


def unversioned(state: Path) -> list[Path]:
    """The old release's JSON records: none of them says its format."""
    found = [p for p in state.rglob("*.json") if p.is_file() and "sandbox" not in p.parts]
    for path in found:
        raw = json.loads(path.read_text())
        assert not (isinstance(raw, dict) and "format" in raw and "written_by" in raw), path
    return found


def test_pending_changes_of_each_engine_survive_the_upgrade(
        engine: str, old_code: Path, git_project: Path, isolated_state: Path,
        tmp_path: Path) -> None:
    outside = engine in SYSTEM_ENGINES
    cli(old_code, "run", "--engine", engine, "-c", WORK + (OUTSIDE if outside else ""),
        cwd=git_project)
    before = changes(old_code, git_project)
    assert unversioned(tmp_path / "state")
    inside = {os.path.relpath(c["path"], git_project): c["kind"] for c in before
              if c["in_project"]}
    assert inside == {"added.txt": "added", "mod.txt": "modified", "del.txt": "deleted",
                      "opq": "replaced", "opq/new.txt": "added"}
    home = str(isolated_state / "outside.txt")
    assert ({c["path"]: c["kind"] for c in before if not c["in_project"]}.get(home)
            == ("added" if outside else None))
    after = changes(NEW, git_project)      # the same changes; newer fields (e.g. special) aside
    assert [{k: c[k] for k in b} for c, b in zip(after, before, strict=True)] == before
    cli(NEW, "commit", cwd=git_project)
    assert (git_project / "added.txt").read_text() == "added\n"
    assert (git_project / "mod.txt").read_text() == "line 1\nline 2\n"
    assert not (git_project / "del.txt").exists()
    assert sorted(os.listdir(git_project / "opq")) == ["new.txt"]
    if outside:
        assert (isolated_state / "outside.txt").read_text() == "outside\n"
    assert changes(NEW, git_project) == []


MANY = ("for i in $(seq 1 40); do echo new $i > f$i.txt; done; echo 'line 2' >> mod.txt; "
        "rm del.txt; rm -r opq; mkdir opq; echo fresh > opq/new.txt")


def tree_state(root: Path) -> dict[str, tuple[str, bytes]]:
    found = {}
    for dirpath, dirnames, names in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in [*names, *dirnames]:
            path = Path(dirpath, name)
            st = path.lstat()
            data = path.read_bytes() if path.is_file() else b""
            found[str(path.relative_to(root))] = (oct(st.st_mode), data)
    return found


def test_a_commit_the_old_release_left_half_done_completes_as_the_old_one_would(
        old_code: Path, git_project: Path, tmp_path: Path) -> None:
    """Two identical sessions, both killed at the same step: the old release finishes one,
    this one the other; the real trees and what stays pending are the same."""
    twins = []
    for name in ("by-old", "by-new"):
        project = tmp_path / name / "proj"
        shutil.copytree(git_project, project, symlinks=True)
        env = {"XDG_STATE_HOME": str(tmp_path / name / "state")}
        cli(old_code, "run", "--engine", "overlay", "-c", MANY, cwd=project, env=env_for(
            old_code, **env))
        commit_killed(old_code, 12, project, env=env_for(old_code, **env))
        journals = list((tmp_path / name / "state").rglob("commit-journal.json"))
        assert len(journals) == 1 and json.loads(journals[0].read_text())["version"] == 1
        published = [n for n in range(1, 41) if (project / f"f{n}.txt").exists()]
        assert tree_state(project) != tree_state(git_project) and len(published) < 40
        twins.append((project, env, journals[0]))
    (old_project, old_env, _), (new_project, new_env, journal) = twins
    assert tree_state(old_project) == tree_state(new_project)   # the same point of death
    cli(old_code, "commit", cwd=old_project, env=env_for(old_code, **old_env))
    cli(NEW, "commit", cwd=new_project, env=env_for(NEW, **new_env))
    assert not journal.exists()
    assert tree_state(new_project) == tree_state(old_project)
    assert (new_project / "f40.txt").read_text() == "new 40\n"
    assert changes(NEW, new_project, env=env_for(NEW, **new_env)) == []
