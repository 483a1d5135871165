"""The package layering of docs/architecture.md, enforced (issue 9).

Imports are read with ``ast`` (every import, also lazy and type-checking ones,
unless a rule says "at module level"), so a new one that runs back up a layer
fails here rather than in review.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import manager

ROOT = Path(manager.__file__).parent
REPO = ROOT.parent

# What each unit of manager/ may import of ours besides itself. A unit is a subpackage
# (manager/<pkg>/) or a top-level module (manager/<mod>.py).
MAY_IMPORT: dict[str, set[str]] = {
    "errors": set(),
    "record": set(),                                  # dataclass-like values without dataclasses
    "fastjson": set(),                                # json for the hook path without `re`
    "versioning": {"errors", "fastjson", "fsutil", "__init__"},   # record formats (the hook reads it)
    "fsutil": {"errors", "longpath"},
    "longpath": set(),                                # paths of any length, trees of any depth
    "sparse": set(),                                  # copies that keep holes
    "ui": {"errors"},
    "changes": {"errors", "longpath", "record", "sparse", "ui"},   # ui: names shown escaped
    "git": {"changes", "errors", "record"},                     # git plumbing and the sandbox's git view
    "commit": {"changes", "errors", "fsutil", "git", "longpath", "record", "sparse", "versioning"},
    "config": {"errors", "fsutil", "record", "versioning", "session.paths", "engines.registry",
               "egress.setting"},
    "hide": {"config", "errors", "fastjson", "fsutil", "session.paths"},   # what sandboxes hide
    "egress": {"config", "errors", "fastjson", "fsutil"},      # setting `network` and the egress record
    "session": {"changes", "config", "engines", "errors", "fastjson", "fsutil", "hide", "record",
                "versioning"},
    "engines": {"changes", "commit", "config", "egress", "errors", "fastjson", "fsutil", "hide",
                "record", "session"},
    "guardrails": {"changes", "config", "egress", "engines", "errors", "fsutil", "git", "longpath",
                   "session", "ui", "versioning"},
    "claude": {"changes", "config", "egress", "engines", "errors", "fastjson", "fsutil", "guardrails",
               "session", "ui", "versioning"},
    "review": {"changes", "git", "longpath", "record", "ui"},
    "commands": {"changes", "claude", "commit", "config", "egress", "engines", "errors", "git",
                 "guardrails", "hide", "review", "session", "ui", "versioning"},
    "main": {"errors", "commands", "__init__"},
    "__main__": {"main"},
    "__init__": set(),
}
# Modules held to fewer imports than their package.
MODULE_MAY_IMPORT: dict[str, set[str]] = {
    "session.paths": {"errors"},            # the rules the hook path shares: os alone
    "engines.registry": {"errors", "config", "engines", "record"},
    "egress.setting": set(),                # config imports it
    "engines.base": {"changes", "session", "engines", "record"},
    "claude.records": set(),
}
# The hook's hot path: what these may import at module level (stdlib beyond these is refused).
HOT_PATH = ["manager.claude.entry", "manager.claude.pretool", "manager.claude.posttool",
            "manager.claude.guard", "manager.claude.state", "manager.claude.hotconfig"]
HOT_FORBIDDEN = ("json", "re", "enum", "functools", "collections", "typing", "pathlib",
                 "dataclasses", "subprocess", "tempfile", "shutil",
                 "contextlib", "yaml", "manager.config", "manager.engines", "manager.guardrails",
                 "manager.session.store", "manager.session.context", "manager.commands")
HOOK_JSON = ("hookSpecificOutput", "systemMessage", "permissionDecision", "additionalContext")


def _modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        found.append((".".join(rel.parts), path))
    return found


def _unit(module: str) -> str:
    head = module.split(".")[0]
    return head


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _imports(path: Path) -> list[str]:
    """Every ``manager.*`` module ``path`` imports, as ``pkg.mod`` (without ``manager.``);
    a name imported from ``manager/__init__.py`` counts as ``__init__``."""
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
    return any(target == a or target.startswith(a + ".") or _unit(target) == a for a in allowed)


@pytest.mark.parametrize(("module", "path"), _modules(), ids=[m for m, _ in _modules()])
def test_imports_follow_the_layers(module: str, path: Path):
    unit = _unit(module)
    assert unit in MAY_IMPORT, f"{module}: a new unit; add it to the layering (and the docs)"
    allowed = MODULE_MAY_IMPORT.get(module, MAY_IMPORT[unit] | {unit})
    wrong = [t for t in _imports(path) if not _allowed(t, allowed)]
    assert not wrong, f"{module} imports {wrong}; it may import only {sorted(allowed)}"


def test_hook_path_imports_nothing_heavy_at_start_up():
    code = ("import sys\nbefore = set(sys.modules)\n"
            + "".join(f"import {m}\n" for m in HOT_PATH)
            + "print('\\n'.join(sorted(set(sys.modules) - before)))")
    out = subprocess.run([sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, "
                          f"{str(REPO)!r})\n{code}"], capture_output=True, text=True, check=True)
    loaded = out.stdout.split()
    heavy = [m for m in loaded if any(m == f or m.startswith(f + ".") for f in HOT_FORBIDDEN)]
    assert not heavy, f"the hook path imports {heavy} at start-up"


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
