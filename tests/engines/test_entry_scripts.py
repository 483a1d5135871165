"""Rules that must exist both in a bash script and in Python, tied to one source (issue 9).

The per-call scripts run before (or instead of) any Python, so they cannot import
the constants; these tests read the scripts and hold them to the Python side.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from manager.claude import rewrite
from manager.claude import state
from manager.engines import base
from manager.engines.overlay import engine as overlay
from manager.engines.overlay.holder import names
from manager.main import build_parser

ENGINES_DIR = Path(base.__file__).parent
ENTRY_SCRIPTS = sorted(ENGINES_DIR.glob("*/enter.sh"))


def test_there_are_entry_scripts():
    assert {p.parent.name for p in ENTRY_SCRIPTS} >= {"overlay", "try_", "container"}


@pytest.mark.parametrize("script", ENTRY_SCRIPTS, ids=lambda p: p.parent.name)
def test_entry_script_fallback_is_a_command_line_the_cli_accepts(script: Path):
    text = script.read_text()
    assert f"${base.NO_FALLBACK}" in text and f"exit {base.NOT_ENTERED}" in text
    # -P: never the working directory (the project, the agent's to write) first on the path.
    found = re.search(r'exec "\$PY" -P (?:"\$\{py_flags\[@\]\}" )?-m manager (run .*?) -c "\$CMD"',
                      text.replace("\\\n", " "))
    assert found, "the fallback hands over to `workspace run`, with -P"
    flags = re.findall(r"(?<![\w-])(--[a-z-]+)", found.group(1))
    assert flags[:3] == ["--session", "--cwd", "--cwd-out"]
    argv = ["run", *(part for flag in flags for part in (flag, "1")), "-c", "true"]
    args = build_parser("run").parse_args(argv)     # an unknown flag exits here
    assert all(getattr(args, flag[2:].replace("-", "_")) is not None for flag in flags)
    assert args.script == "true"


def test_overlay_holder_files_are_named_alike_everywhere():
    text = overlay.ENTER_SCRIPT.read_text()
    assert f'<"$S/{names.HOLDER_PID}"' in text
    assert f': >"$S/{names.LAST_USED}"' in text
    # "<pid> <start time>": the script compares field 22 of /proc/PID/stat, as procs.start_time does.
    assert "${st[21]}" in text


def test_finish_script_writes_what_the_hook_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    finish = Path(rewrite.FINISH).read_text()
    assert f'"$2/{state.CWD}"' in finish
    session_dir = Path(state.paths.session_root("fin-1"))
    session_dir.mkdir(parents=True)
    inside = tmp_path / "inside dir"
    inside.mkdir()
    cwd_file = tmp_path / "call.cwd"
    cwd_file.write_text(f"{inside}\n")
    state_dir = os.path.realpath(state.paths.state_root())
    done = subprocess.run(["bash", "-c", '. "$0" 0 "$1" "$2" "$3"; echo "rc=$? pwd=$PWD"',
                           rewrite.FINISH, str(session_dir), str(cwd_file), state_dir],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == f"rc=0 pwd={inside}"
    assert state.read_cwd("fin-1") == (str(inside), str(inside))
    assert cwd_file.exists()       # PostToolUse removes it (no rm on the call's path)


def test_the_overlay_entry_and_holder_share_the_sync_protocol():
    """The entry's side of "bring the snapshotted directories up to date" (holder.sync.Sync)."""
    text = overlay.ENTER_SCRIPT.read_text()
    for name in (names.SYNC_REQUEST, names.SYNC_SLEEP, names.SYNC_DONE, names.SYNC_DIRTY):
        assert f'"$S/{name}"' in text or f"$S/{name}" in text, name
    assert f"$why == {names.RETIRED}" in text


def test_the_overlay_entry_knows_the_lean_runs_variable():
    """commands/run_lean sets it; the entry reads it, and the full path never passes it on."""
    from manager.commands import run_lean

    assert f"lean=${run_lean.LEAN_RUN}\nunset {run_lean.LEAN_RUN}\n" in overlay.ENTER_SCRIPT.read_text()
    assert f'env.pop("{run_lean.LEAN_RUN}", None)' in Path(overlay.__file__).read_text()
