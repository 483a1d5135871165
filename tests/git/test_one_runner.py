"""git is run by manager/git/plumbing.py alone: one place sets its environment (the
caller's GIT_DIR, GIT_INDEX_FILE... never reach it; no program the repository's
configuration names runs)."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import manager
from manager.git import plumbing

ROOT = Path(manager.__file__).parent


def _git_lists(tree: ast.Module) -> set[str]:
    """Module-level names bound to an argv that starts with git (``_GIT = ["git", ...]``)."""
    return {target.id for node in tree.body if isinstance(node, ast.Assign)
            and _starts_with_git(node.value, set())
            for target in node.targets if isinstance(target, ast.Name)}


def _starts_with_git(node: ast.expr, names: set[str]) -> bool:
    if isinstance(node, ast.Name):
        return node.id in names
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        return False
    first = node.elts[0]
    if isinstance(first, ast.Starred):
        return _starts_with_git(first.value, names)
    return isinstance(first, ast.Constant) and first.value == "git"


def git_runs(source: str) -> list[int]:
    """Lines of ``source`` that call something with a git argv."""
    tree = ast.parse(source)
    names = _git_lists(tree)
    return [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Call)
            and node.args and _starts_with_git(node.args[0], names)]


def test_the_finder_sees_direct_and_indirect_argvs():
    assert git_runs('import subprocess\nsubprocess.run(["git", "status"])\n') == [2]
    assert git_runs('_GIT = ["git", "-c", "x=y"]\nPopen([*_GIT, "ls-files"])\n') == [2]
    assert git_runs('subprocess.run(["ls"])\nx = ["git"] == argv[:1]\n') == []


def test_only_the_plumbing_runs_git():
    runs = [f"{path.relative_to(ROOT)}:{line}" for path in sorted(ROOT.rglob("*.py"))
            if path != ROOT / "git" / "plumbing.py" for line in git_runs(path.read_text())]
    assert not runs, f"git run outside manager/git/plumbing.py: {runs}"


def test_a_question_in_a_directory_ignores_the_callers_git_variables(tmp_path: Path,
                                                                    monkeypatch) -> None:
    real = tmp_path / "real"
    other = tmp_path / "other"
    for repo in (real, other):
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (real / ".gitignore").write_text("*.log\n")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))      # the caller's, pointing elsewhere
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    proc = plumbing.run_in(real, "check-ignore", "--no-index", "x.log")
    assert proc.returncode == 0 and proc.stdout.strip() == b"x.log"
    assert not any(k in plumbing.discovering_env() for k in ("GIT_DIR", "GIT_WORK_TREE"))
