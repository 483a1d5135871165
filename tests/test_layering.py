"""The package layering of docs/architecture.md, enforced (issue 9).

Imports are read with ``ast`` (every import, also lazy and type-checking ones,
unless a rule says "at module level"), so a new one that runs back up a layer
fails here rather than in review.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import manager

ROOT = Path(manager.__file__).parent
REPO = ROOT.parent

# What each unit of manager/ may import of ours besides itself. A unit is a subpackage
# (manager/<pkg>/), a top-level module (manager/<mod>.py), or a module of a package listed
# by itself (session's record and paths sit below the engines; the rest of session above).
# docs/architecture.md's table of packages is tested against this one (leaves aside).
MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "record": set(),                                  # dataclass-like values without dataclasses
    "fastjson": set(),                                # json for the hook path without `re`
    "versioning": {"errors", "fastjson", "fs", "__init__"},   # record formats (the hook reads it)
    "fs": {"errors"},                                 # atomic writes and locks (util), paths of any
                                                      # length (longpath), copies that keep holes (sparse)
    "ui": {"errors"},
    "changes": {"errors", "fs", "record", "ui",    # ui: names shown escaped
                "session.paths"},                     # is_within: the one path rule
    "git": {"changes", "errors", "record"},                     # git plumbing and the sandbox's git view
    "commit": {"changes", "errors", "fs", "git", "record", "versioning"},
    "session.paths": {"errors"},                      # the rules the hook path shares: os alone
    "session.store": {"errors", "fastjson", "fs", "record", "versioning", "session.paths"},
    "session.health": {"errors", "versioning", "session.paths", "session.store"},
    "egress.setting": set(),                          # the `network` setting's type: config's
    "config": {"errors", "fs", "record", "versioning", "session.paths", "egress.setting"},
    "hide": {"config", "errors", "fastjson", "fs", "session.paths"},   # what sandboxes hide
    "egress": {"config", "errors", "fastjson", "fs", "ui"},   # ui: the record's hosts shown quoted
    "engines": {"changes", "commit", "config", "egress", "errors", "fastjson", "fs", "hide",
                "record", "session.paths", "session.store", "ui"},   # ui: notes through the sink
    "session": {"changes", "config", "engines", "errors", "fastjson", "fs", "hide", "record",
                "versioning"},                        # and its own record (the units above)
    "guardrails": {"changes", "config", "egress", "engines", "errors", "fs", "git",
                   "session", "ui", "versioning"},
    "claude": {"changes", "config", "egress", "engines", "errors", "fastjson", "fs", "guardrails",
               "session", "ui", "versioning"},
    "review": {"changes", "fs", "git", "record", "ui"},
    "service.endpoint": {"fs", "session.paths"},      # where the service listens; its lock
    "commands": {"changes", "claude", "commit", "config", "egress", "engines", "errors",
                 "fastjson", "git", "guardrails", "hide", "review", "service.endpoint",
                 "session", "ui", "versioning"},      # fastjson: run_lean, the lean `run`
    "main": {"errors", "commands", "ui", "__init__"},   # ui: errors through the sink's filter
    # The resident service: the hooks' handlers, and the CLI's review commands in a child.
    "service": {"claude", "errors", "fastjson", "fs", "main", "service.endpoint",
                "session.paths", "ui"},
    "__main__": {"main"},
    "__init__": set(),
}
# Leaves every layer may use; the docs name them once instead of in every row.
LEAVES = {"errors", "fs", "record", "ui", "__init__"}
# Modules held to fewer imports than their unit.
MODULE_MAY_IMPORT: dict[str, set[str]] = {
    "engines.registry": {"errors", "config", "engines", "record"},
    "engines.base": {"changes", "session.store", "engines", "record"},
    "claude.records": set(),
}
# The hook's hot path: what these may import at module level (stdlib beyond these is refused).
HOT_PATH = ["manager.claude.entry", "manager.claude.pretool", "manager.claude.posttool",
            "manager.claude.guard", "manager.claude.state", "manager.claude.hotconfig"]
HOT_FORBIDDEN = ("json", "re", "enum", "functools", "collections", "typing", "pathlib",
                 "dataclasses", "subprocess", "tempfile", "shutil",
                 "contextlib", "yaml", "manager.config", "manager.engines", "manager.guardrails",
                 "manager.session.store", "manager.session.context", "manager.commands")
# `workspace run`'s lean path (commands/run_lean): the entry exec'd before argparse, YAML or
# the package's heavier modules are imported.
LEAN_RUN_PATH = ["manager.main", "manager.commands.run_lean"]
LEAN_RUN_FORBIDDEN = (*(m for m in HOT_FORBIDDEN if m != "manager.commands"), "argparse",
                      "shlex", "importlib.util", "manager.commands.run", "manager.commands.common")
HOOK_JSON = ("hookSpecificOutput", "systemMessage", "permissionDecision", "additionalContext")


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        found.append((".".join(rel.parts), path))
    return found


def _unit(module: str) -> str:
    """The most specific unit of the table that holds ``module``."""
    parts = module.split(".")
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in MAY_IMPORT:
            return ".".join(parts[:end])
    return parts[0]


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path) -> list[str]:
    """Every ``manager.*`` module ``path`` imports, as ``pkg.mod`` (without ``manager.``);
    a name imported from ``manager/__init__.py`` counts as ``__init__``. Every import node
    counts: inside functions and under ``if TYPE_CHECKING:`` as well as at the top."""
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module != "manager" and not node.module.startswith("manager."):
                continue
            base = node.module.removeprefix("manager").removeprefix(".")
            for alias in node.names:
                full = f"{base}.{alias.name}" if base else alias.name
                names.append(full if _is_module(full) else base or "__init__")
        elif isinstance(node, ast.Import):
            names += [a.name.removeprefix("manager.") for a in node.names
                      if a.name.startswith("manager.")]
    return names


def _allowed(target: str, allowed: set[str]) -> bool:
    """A package named in ``allowed`` brings the units inside it (session: its record too)."""
    unit = _unit(target)
    return unit in allowed or unit.split(".")[0] in allowed


def _edges(table: dict[str, set[str]], unit: str) -> set[str]:
    named = table.get(unit, set())
    inside = {u for u in table if u.split(".")[0] in named}
    return (named | inside) - {unit}


def _cycle(table: dict[str, set[str]]) -> list[str]:
    """A circle of units in ``table`` (each may import the next), or []."""
    state: dict[str, int] = {}      # 1: on the current path, 2: done
    path: list[str] = []

    def visit(unit: str) -> list[str]:
        state[unit] = 1
        path.append(unit)
        for below in sorted(_edges(table, unit)):
            if state.get(below) == 1:
                return path[path.index(below):] + [below]
            if below not in state and (found := visit(below)):
                return found
        path.pop()
        state[unit] = 2
        return []

    for unit in sorted(table):
        if unit not in state and (found := visit(unit)):
            return found
    return []


def test_the_layers_are_an_order():
    assert not _cycle(MAY_IMPORT), f"the layering has a circle: {' -> '.join(_cycle(MAY_IMPORT))}"
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b", "a"}, "b": set()}) == []


def test_every_allowed_unit_is_in_the_table():
    named = {u for allowed in (*MAY_IMPORT.values(), *MODULE_MAY_IMPORT.values()) for u in allowed}
    assert named <= set(MAY_IMPORT)
    assert {_unit(m) for m in MODULE_MAY_IMPORT} <= set(MAY_IMPORT)
    assert all(allowed <= MAY_IMPORT[_unit(m)] | {_unit(m)} for m, allowed in MODULE_MAY_IMPORT.items())


def test_imports_inside_functions_and_under_type_checking_count(tmp_path: Path):
    source = tmp_path / "probe.py"
    source.write_text("TYPE_CHECKING = False\n"
                      "if TYPE_CHECKING:\n    from manager.engines.base import Engine\n"
                      "def later():\n    from manager.session import store\n"
                      "    import manager.config\n")
    assert sorted(_imports(source)) == ["config", "engines.base", "session.store"]


def _doc_rows() -> dict[str, set[str]]:
    """docs/architecture.md's package table: each unit its row names, to what it may import."""
    text = (REPO / "docs/architecture.md").read_text()
    table = text.split("| package | owns | may import |", 1)[1].split("\n\n", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in table.splitlines()[2:]:
        cells = line.strip().strip("|").split("|")
        units = [_doc_unit(n) for n in re.findall(r"`([^`]+)`", cells[0])]
        allowed = {_doc_unit(n) for n in re.findall(r"`([^`]+)`", cells[-1])}
        rows.update((u, allowed) for u in units)
    return rows


def _doc_unit(name: str) -> str:
    return name.removesuffix("/").removesuffix(".py").replace("/", ".")


def test_the_docs_table_is_this_table():
    rows = _doc_rows()
    for unit, allowed in MAY_IMPORT.items():
        if unit in LEAVES or unit in ("main", "__main__"):
            assert allowed <= LEAVES | {"main", "commands"}, unit
            continue
        assert unit in rows, f"docs/architecture.md has no row for {unit}"
        assert rows[unit] - LEAVES == allowed - LEAVES, (
            f"docs/architecture.md: {unit} may import {sorted(rows[unit])}; "
            f"the layering test says {sorted(allowed - LEAVES)}")


@pytest.mark.parametrize(("module", "path"), _modules(), ids=[m for m, _ in _modules()])
def test_imports_follow_the_layers(module: str, path: Path):
    unit = _unit(module)
    assert unit in MAY_IMPORT, f"{module}: a new unit; add it to the layering (and the docs)"
    allowed = MODULE_MAY_IMPORT.get(module, MAY_IMPORT[unit] | {unit})
    wrong = [t for t in _imports(path) if not _allowed(t, allowed)]
    assert not wrong, f"{module} imports {wrong}; it may import only {sorted(allowed)}"


@pytest.mark.parametrize(("modules", "forbidden"), [(HOT_PATH, HOT_FORBIDDEN),
                                                    (LEAN_RUN_PATH, LEAN_RUN_FORBIDDEN)],
                         ids=["hook", "lean run"])
def test_hot_paths_import_nothing_heavy_at_start_up(modules: list[str], forbidden: tuple[str, ...]):
    code = ("import sys\nbefore = set(sys.modules)\n"
            + "".join(f"import {m}\n" for m in modules)
            + "print('\\n'.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, "
                          f"{str(REPO)!r})\n{code}"], capture_output=True, text=True, check=True)
    loaded = out.stdout.split()
    heavy = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in forbidden)]
    assert not heavy, f"{modules} import {heavy} at start-up"


def test_only_the_claude_package_speaks_the_hook_protocol():
    speakers = []
    for module, path in _modules():
        if _unit(module) == "claude":
            continue
        text = path.read_text()
        speakers += [f"{module}: {key}" for key in HOOK_JSON if f'"{key}"' in text]
    assert not speakers


def test_commands_are_imported_only_by_main():
    users = [m for m, p in _modules() if _unit(m) not in ("commands", "main")
             and any(_unit(t) == "commands" for t in _imports(p))]
    assert not users


def test_at_most_eight_loose_modules():
    """manager/ is packages and a few leaves: a new module joins a package (issue 22)."""
    loose = sorted(p.name for p in ROOT.glob("*.py") if p.name not in ("__init__.py", "__main__.py"))
    assert len(loose) <= 8, loose
