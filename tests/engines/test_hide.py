"""``hide`` on every engine (issue 24): a hidden file's content never reaches a sandboxed
command, whichever way it reads, and nothing it writes there reaches the host.

One session per engine tries every way at once: the defaults (~/.ssh, ~/.netrc), a path an
untrusted project file adds, Claude Code's ``denyRead`` and a ``Read(...)`` deny rule, each
read with cat, python's open, a symlink, a hard link, /proc/self/root and /proc/1/root;
then unmount, remount and bind attempts (where the command is not root of its
namespace: docs/security.md); then writes, which must stay off the host and out of review.
"""

from __future__ import annotations

import json
import shlex
import uuid
from pathlib import Path

import pytest

from tests.engines.support import status

pytestmark = pytest.mark.engine

READS = r'''
for f in "$@"; do
  cat "$f"; python3 -c 'import sys; print(open(sys.argv[1]).read())' "$f"
  ln -s "$f" "$HOME/ln.$$" && cat "$HOME/ln.$$"; rm -f "$HOME/ln.$$"
  ln "$f" "$HOME/hard.$$" && cat "$HOME/hard.$$"; rm -f "$HOME/hard.$$"
  cat "/proc/self/root$f"
  [ -n "$PROC1" ] && cat "/proc/1/root$f"
done 2>&1
cat README.txt
'''
# A command that is not root of its namespace cannot take a mask away, nor mount around it.
UNDO = r'''
for d in "$@"; do
  umount "$d"; umount -l "$d"; mount -o remount,rw "$d"
  mkdir -p "$HOME/m.$$" && mount --bind "$(dirname "$d")" "$HOME/m.$$" && cat "$HOME/m.$$"/*/*
  unshare -Urm sh -c 'umount "$1"; umount -l "$1"; cat "$1"/* "$1"' sh "$d"
  cat "$d"/* "$d"
done 2>&1
'''
WRITES = r'''
echo leaked > "$HOME/.netrc"; echo leaked > "$HOME/.ssh/new"
mkdir -p "$HOME/.aws" && echo leaked > "$HOME/.aws/credentials"
true
'''


def _secrets(tmp_path: Path, project: Path, home: Path) -> dict[Path, str]:
    """Each hidden way, a file holding a token of its own."""
    tokens: dict[Path, str] = {}

    def secret(path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tokens[path] = f"secret-{uuid.uuid4().hex}"
        path.write_text(tokens[path] + "\n")
        return path

    secret(home / ".ssh" / "id_test")                         # a default, a directory
    secret(home / ".netrc")                                   # a default, a file
    extra = secret(tmp_path / "extra" / "key")                # the project file adds it
    (project / ".workspace.yaml").write_text(f"hide: [{extra.parent}]\n")   # untrusted
    denied = secret(tmp_path / "denied" / "key")              # Claude's sandbox denyRead
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(json.dumps(
        {"sandbox": {"filesystem": {"denyRead": [f"/{denied.parent}"]}}}))
    secret(project / ".env")                                  # Claude's Read(...) deny rule
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text(json.dumps(
        {"permissions": {"deny": ["Read(./.env)"]}}))
    return tokens


def test_hidden_files_are_never_read_nor_written(ws, project: Path, tmp_path: Path,
                                                  isolated_state: Path, engine_name: str):
    home = isolated_state
    tokens = _secrets(tmp_path, project, home)
    files = [str(p) for p in tokens]
    if engine_name == "try-0.2.0":   # no -i: a session that must hide the user's paths refuses
        proc = ws("run", "--", "bash", "-c", READS, "reads", *files)
        assert proc.returncode != 0 and "cannot hide paths" in proc.stderr, proc.stderr
        assert not any(t in proc.stdout + proc.stderr for t in tokens.values())
        return
    # try's pid 1 is outside its chroot (try is no boundary: docs/security.md).
    proc1 = "" if engine_name.startswith("try") else "PROC1=1; "
    undo = UNDO if _cannot_undo(engine_name) else ""
    dirs = [str(home / ".ssh"), str(home / ".netrc"), str(tmp_path / "extra"), str(project / ".env")]
    script = f'{proc1}{READS}\nset -- {shlex.join(dirs)}\n{undo}'
    proc = ws("run", "--", "bash", "-c", script, "reads", *files)
    seen = proc.stdout + proc.stderr
    assert "hello" in seen, seen          # the command ran, and reads what is not hidden
    assert not [p for p, t in tokens.items() if t in seen], seen
    before = {p: p.read_text() for p in tokens}
    ws("run", "--", "bash", "-c", WRITES, check=True)
    hidden = [str(home / n) for n in (".ssh", ".netrc", ".aws")] + [str(project / ".env")]
    assert not [p for p in status(ws) if any(p == h or p.startswith(h + "/") for h in hidden)]
    ws("commit", check=True)
    assert {p: p.read_text() for p in tokens} == before
    assert not (home / ".ssh" / "new").exists() and not (home / ".aws").exists()


def _cannot_undo(engine_name: str) -> bool:
    """Where taking a mask off uncovers nothing: the containers (no CAP_SYS_ADMIN), and the
    overlay engine (what a call that is root in its namespace unmounts uncovers an empty
    placeholder: holder/masklayer.py). try is no boundary."""
    return not engine_name.startswith("try")



def test_doctor_lists_what_is_hidden_and_proves_it(ws, isolated_state: Path,
                                                   monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("WORKSPACE_ENGINE", "overlay")
    (isolated_state / ".ssh").mkdir()
    report = json.loads(ws("doctor", "--engine", "overlay", "--json").stdout)["hide"]
    assert str(isolated_state / ".ssh") in report["paths"]
    # As root the call is root of the namespace that holds the masks: it takes one off
    # (umount), and finds an empty placeholder below (holder/masklayer.py).
    assert (report["engine"], report["held"]) == ("overlay", True), report
    assert "unmounted the mask" not in report["detail"], report
