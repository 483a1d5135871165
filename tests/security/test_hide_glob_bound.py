"""Issue 20: a ``hide`` glob over the whole file system cannot stall the sandbox's start.

An untrusted project file may add ``hide`` patterns (it only adds); ``/**/id_*`` made the
next sandbox start walk every file on the host. Expanding patterns that glob outside the
project now has a budget (entries read and time, manager/fs/globwalk.py): past it the
pattern is refused with a message naming it, the sandbox does not start (nothing runs
unhidden), and review and commit, which read the same patterns, pass over it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from manager import hide
from manager.errors import ConfigError

WHOLE_FS = ["/**/id_*", "/*/**/x-*", "/**/*/.secret", "/*/*/*/*/*/*/*"]


@pytest.mark.parametrize("pattern", WHOLE_FS)
def test_a_glob_over_the_file_system_is_refused(pattern: str, project: Path):
    with pytest.raises(ConfigError, match="hide pattern"):
        hide.resolve([pattern], str(project))
    assert hide.resolve([pattern], str(project), strict=False) == []   # review, commit


def test_bounded_globs_still_resolve(tmp_path: Path, project: Path):
    (tmp_path / "keys" / "a" / "b").mkdir(parents=True)
    for rel in ("keys/id_rsa", "keys/a/b/id_ed25519", "keys/a/.hidden"):
        (tmp_path / rel).write_text("secret\n")
    (project / "sub").mkdir()
    (project / "sub" / ".env").write_text("x\n")
    found = {t.path for t in hide.resolve([f"{tmp_path}/keys/**/id_*", f"{tmp_path}/keys/*/.h*",
                                           "**/.env"], str(project))}
    assert found == {str(tmp_path / "keys/id_rsa"), str(tmp_path / "keys/a/b/id_ed25519"),
                     str(tmp_path / "keys/a/.hidden"), str(project / "sub/.env")}


def test_the_sandbox_refuses_to_start_and_review_still_works(ws, project: Path):
    (project / "out").mkdir()
    ws("run", "--", "sh", "-c", "echo kept > out/kept.txt", check=True)
    ws("discard", "--yes", "out")     # the session stays; its sandbox is rebuilt next
    (project / ".workspace.yaml").write_text("hide: ['/**/id_*']\n")
    proc = ws("run", "--", "sh", "-c", "echo ran > out/ran.txt")
    assert proc.returncode != 0
    assert "/**/id_*" in proc.stderr and "refused" in proc.stderr
    assert ws("status").returncode == 0
    assert ws("commit").returncode == 0
    assert not (project / "out" / "ran.txt").exists()
