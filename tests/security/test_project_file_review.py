"""Issue 20: nothing the agent writes in the project's settings file stops review, commit
or discard.

``.workspace.yaml`` is the agent's to write (the Write tool, or a committed change). An
unknown key made status, diff, commit and discard exit 1 until the user edited the file.
Review and commit now skip what they cannot read there, with a warning; the hook keeps
refusing a call while the file cannot be read (the sandbox is never loosened by it).
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.claude.conftest import Claude

# What the agent may write there: each broke the review commands before.
BAD_FILES = {
    "unknown key": "no_such_setting: 1\n",
    "unknown nested key": "commit:\n  no_such: 1\n",
    "wrong type": "commit:\n  wait_seconds: soon\n",
    "not a list": "exclude: '*.log'\n",
    "not a choice": "engine: nonsense\n",
    "not a mapping": "- a\n- b\n",
    "not YAML": "key: [unclosed\n",
    "an alias": "a: &x [1]\nb: *x\n",
    "not UTF-8": b"exclude: ['\xff']\n",
    "too large": "# " + "x" * (2 << 20) + "\n",
}


def _write(project: Path, content: str | bytes) -> None:
    path = project / ".workspace.yaml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


def test_review_commit_and_discard_read_past_a_bad_project_file(ws, project: Path):
    names = [f"f{i}.txt" for i in range(len(BAD_FILES))]
    ws("run", "--", "sh", "-c", "for f in " + " ".join(names) + "; do echo $f > $f; done",
       check=True)
    for name, (kind, content) in zip(names, BAD_FILES.items(), strict=True):
        _write(project, content)
        for args in (("status",), ("diff", "--no-pager", name)):
            proc = ws(*args)
            assert proc.returncode == 0, (kind, args, proc.stderr)
            assert name in proc.stdout, kind
            assert "warning:" in proc.stderr and ".workspace.yaml" in proc.stderr, kind
        proc = ws("commit", name) if kind != "not YAML" else ws("discard", "--yes", name)
        assert proc.returncode == 0, (kind, proc.stderr)
        assert (project / name).exists() == (kind != "not YAML"), kind
    assert ws("status", "--json").returncode == 0


def test_a_fifo_or_directory_there_blocks_nothing(ws, project: Path):
    ws("run", "--", "sh", "-c", "echo kept > kept.txt", check=True)
    os.mkfifo(project / ".workspace.yaml")
    assert ws("status", timeout=30).returncode == 0
    os.unlink(project / ".workspace.yaml")
    (project / ".workspace.yaml").mkdir()
    proc = ws("commit", timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert (project / "kept.txt").read_text() == "kept\n"


def test_valid_settings_beside_a_bad_one_still_apply(ws, project: Path):
    """Only what is wrong is skipped: an `exclude` next to an unknown key still holds."""
    ws("run", "--", "sh", "-c", "echo a > a.log; echo b > b.txt", check=True)
    _write(project, "exclude: ['*.log']\nno_such_setting: 1\n")
    proc = ws("commit")
    assert proc.returncode == 0, proc.stderr
    assert (project / "b.txt").exists() and not (project / "a.log").exists()


def test_the_hook_still_refuses_while_the_file_cannot_be_read(claude: Claude, project: Path,
                                                              tmp_path: Path):
    claude.start()
    _write(project, "no_such_setting: 1\npassthrough: [touch]\n")
    marker = tmp_path / "ran"
    answer = claude.pre_bash(f"touch {marker}")
    assert answer.decision == "deny", answer.json
    assert ".workspace.yaml" in str(answer.json)
    assert not marker.exists()
