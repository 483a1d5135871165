"""The sandbox must not steer the client's working directory.

The rewrite reads the sandbox's final directory and moves the client's shell
there. It follows only a directory that is the same on the real disk and lies
outside the state directory (where the sessions' upper directories, the
sandbox's own files, are on the real disk)."""

from __future__ import annotations

import os
from pathlib import Path

from manager.session import paths
from tests.claude.conftest import Claude

from .conftest import upper


def test_a_cd_into_the_upper_dir_is_not_followed(claude: Claude, project: Path) -> None:
    """The command controls what the sandbox reports (it can replace the EXIT trap that
    writes the report, fd 97, to the entry), so it can name its own upper dir, which exists
    on the real disk."""
    claude.start()
    built = upper() / str(project).lstrip("/") / "evil"
    run = claude.bash(f"mkdir -p evil/.git && trap 'printf %s {built} >&97' EXIT")
    assert run.returncode == 0 and built.is_dir(), run   # it exists on the real disk
    assert run.cwd == str(project), "the client was moved into the sandbox's upper dir"


def test_a_cd_into_the_state_directory_is_not_followed(claude: Claude, project: Path) -> None:
    claude.start()
    home = paths.state_root()
    run = claude.bash(f"cd {home}")
    assert run.returncode == 0 and run.cwd == str(project)


def test_a_symlink_replaced_in_the_sandbox_does_not_steer(claude: Claude, project: Path,
                                                           tmp_path: Path) -> None:
    """Real `link -> elsewhere`; the sandbox makes `link` a directory and cds into it: the
    same path on the real disk is another directory, so the client stays."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, project / "link")
    claude.start()
    run = claude.bash("rm link && mkdir link && cd link")
    assert run.returncode == 0 and run.cwd == str(project)


def test_ordinary_cds_are_still_followed(claude: Claude, project: Path) -> None:
    (project / "sub").mkdir()
    claude.start()
    assert claude.bash("cd sub").cwd == str(project / "sub")
    assert claude.bash("cd ..").cwd == str(project)
    run = claude.bash("mkdir -p only-in-sandbox && cd only-in-sandbox")
    assert run.cwd == str(project)                             # not on the real disk
    assert claude.bash("pwd").stdout.strip() == str(project / "only-in-sandbox")
