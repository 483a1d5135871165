"""The engines' shape (issue 22): a package per engine, the holder a program of its own,
one home for each low-level rule. Read from the tree itself, so a new module is held to it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import manager
from manager.engines.overlay import engine as overlay
from manager.engines.overlay.holder import names

MANAGER = Path(manager.__file__).parent
ENGINES = MANAGER / "engines"
HOLDER = ENGINES / "overlay" / "holder"
REPO = MANAGER.parent
MAX_LINES = 600


def _sources(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py") if "__pycache__" not in p.parts)


def test_each_engine_is_a_package_and_only_the_shared_parts_are_loose():
    loose = {p.name for p in ENGINES.iterdir() if p.is_file() and p.name != "__init__.py"}
    assert loose == {"base.py", "registry.py", "procs.py"}
    assert {p.name for p in ENGINES.iterdir() if (p / "__init__.py").is_file()} == \
        {"overlay", "container", "try_"}


def test_no_module_in_manager_is_over_the_line_limit():
    long = {str(p.relative_to(REPO)): n for p in _sources(MANAGER)
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_nothing_edits_the_import_path():
    edits = [str(p.relative_to(REPO)) for p in _sources(MANAGER) if "sys.path" in p.read_text()]
    assert not edits


def test_the_holder_imports_only_the_standard_library_and_its_own_package():
    """It runs with ``-I`` from its directory (see overlay/__main__.py): nothing else is there."""
    for path in [ENGINES / "overlay" / "__main__.py", *_sources(HOLDER)]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                tops = [alias.name.split(".")[0] for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                tops = [(node.module or "").split(".")[0]]
            else:
                continue
            foreign = [t for t in tops if t not in sys.stdlib_module_names and
                       not (path.name == "__main__.py" and t == "holder")]
            assert not foreign, f"{path.relative_to(REPO)} imports {foreign}"


def test_the_holder_program_starts_from_its_directory_alone(tmp_path: Path):
    """As the engine runs it: ``-I``, no PYTHONPATH, from a directory with nothing to import.
    With its arguments missing it fails in main, after every module imported."""
    proc = subprocess.run([sys.executable, "-I", str(overlay.HOLDER_PROGRAM)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == "IndexError: list index out of range"
    assert "ImportError" not in proc.stderr and "ModuleNotFoundError" not in proc.stderr


def test_one_reader_of_the_mount_table():
    """/proc/PID/mountinfo is parsed in holder/mountinfo.py only."""
    readers = [str(p.relative_to(REPO)) for p in _sources(MANAGER, REPO / "tests", REPO / "bench")
               if "/mountinfo" in p.read_text() and p != HOLDER / "mountinfo.py" and p != Path(__file__)]
    assert not readers


def _path_literals(tree: ast.AST) -> set[str]:
    """Strings joined to a path (``x / "name"``) or passed to a call (``os.open("name", ...)``)."""
    found: list[ast.expr] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            found.append(node.right)
        elif isinstance(node, ast.Call):
            found.extend(node.args)
    return {n.value for n in found if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def test_the_layout_names_are_spelled_once():
    """The sandbox's file names are spelled only in holder/names.py (the entry script, which
    cannot import them, is held to them by test_entry_scripts.py)."""
    spelled = {getattr(names, n) for n in dir(names) if n.isupper()}
    for path in _sources(ENGINES / "overlay"):
        if path.name != "names.py":
            literals = _path_literals(ast.parse(path.read_text()))
            assert not literals & spelled, f"{path.relative_to(REPO)} spells {literals & spelled}"


def _runs_an_engine_cli(call: ast.Call) -> bool:
    """``subprocess.X([cli, ...])``, ``[engine.cli, ...]`` or ``["docker", ...]``."""
    func = call.func
    if not (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id == "subprocess" and call.args and isinstance(call.args[0], ast.List)
            and call.args[0].elts):
        return False
    first = call.args[0].elts[0]
    return (isinstance(first, ast.Name) and first.id == "cli") or \
        (isinstance(first, ast.Attribute) and first.attr == "cli") or \
        (isinstance(first, ast.Constant) and first.value in ("docker", "podman"))


def test_docker_and_podman_are_run_by_the_container_client_only():
    client = ENGINES / "container" / "cli.py"
    runners = [f"{p.relative_to(REPO)}:{node.lineno}" for p in _sources(MANAGER) if p != client
               for node in ast.walk(ast.parse(p.read_text()))
               if isinstance(node, ast.Call) and _runs_an_engine_cli(node)]
    assert not runners
