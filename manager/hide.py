"""The ``hide`` setting: host paths that sandboxed commands cannot read (issue 24).

A write in the sandbox can be discarded, a read that leaks cannot: the user's credentials
are hidden from every engine. The list is the ``hide`` setting (defaults, config.HIDE_DEFAULTS: the usual
credential stores and browser profiles), plus what is always hidden (this project's own
state and trust record), plus Claude Code's own read denials (``sandbox.filesystem.denyRead``
and ``Read(...)`` deny rules, :func:`claude_patterns`), so that moving from Claude's
sandbox to this one weakens nothing.

Patterns: ``~`` and ``$VAR`` expanded, ``*``/``?``/``**`` globbed, relative ones taken from
the project's root. :func:`targets` resolves them to the existing host paths to hide (real
paths, symlinks followed, since a mount names a real place), never the project or a
directory holding it (the sandbox could show nothing), and none inside another.

Each engine reads :func:`targets` when it builds the sandbox: paths that appear on the host
later are hidden from the next sandbox on (overlay: next holder; containers: next
container; try: next call).
"""

from __future__ import annotations

import os

from manager.errors import ConfigError

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from collections.abc import Iterable

    from manager.config import Config
    from manager.fs.globwalk import Budget

# Where Claude Code keeps its settings: manager.claude.permissions reads the same files
# (this module sits below it: engines use it); tests/test_hide.py holds the two together.
MANAGED = "/etc/claude-code/managed-settings.json"
MANAGED_DROP_INS = "/etc/claude-code/managed-settings.d"
GLOB_CHARS = frozenset("*?[")
CHECKPOINT_STORE = "workspace-checkpoints.git"   # guardrails.shadow.STORE_NAME
# What expanding the patterns that glob outside the project may read, all together.
GLOB_ENTRIES = 100_000
GLOB_SECONDS = 1.0


class Target:
    """One host path to hide: a directory (an empty one shown) or anything else (an empty file)."""

    __slots__ = ("path", "is_dir")

    def __init__(self, path: str, is_dir: bool) -> None:
        self.path = path
        self.is_dir = is_dir

    def __repr__(self) -> str:
        return f"Target({self.path!r}, is_dir={self.is_dir})"


def always() -> list[str]:
    """Hidden whatever the settings say: this project's state (sessions, records) and the
    trust record that decides what a project file may set."""
    from manager.session import paths

    return [paths.state_root(), paths.trust_file()]


def patterns(config: Config, project: str) -> list[str]:
    """Every pattern in force: the setting, what is always hidden, Claude Code's denials."""
    return list(dict.fromkeys([*config["hide"], *always(), *checkpoint_store(project),
                               *claude_patterns(project)]))


def checkpoint_store(project: str) -> list[str]:
    """The guard rails' snapshots of this project (guardrails/shadow.py): they hold the real
    work tree's files, hidden ones too (an untracked ``.env``), so no sandbox reads them.
    Found as git finds the repository, by reading files only (``.git`` a directory, or a
    file naming one, and its ``commondir``): no git runs here."""
    here = os.path.realpath(project) if project else ""
    while here:
        dot_git = os.path.join(here, ".git")
        common = _git_common_dir(dot_git)
        if common is not None:
            return [os.path.join(common, CHECKPOINT_STORE)]
        here = "" if here == "/" else os.path.dirname(here)
    return []


def _git_common_dir(dot_git: str) -> str | None:
    """The common directory of the repository ``dot_git`` names, or None when it is no
    repository: git passes over a ``.git`` that is not one (no HEAD, objects and refs) and
    looks further up, and so does this."""
    if os.path.isdir(dot_git):
        return _repository_common(dot_git)
    line = _first_line(dot_git)
    if line is None or not line.startswith("gitdir: "):
        return None
    return _repository_common(os.path.join(os.path.dirname(dot_git), line[len("gitdir: "):]))


def _repository_common(git_dir: str) -> str | None:
    """git's own test (setup.c, is_git_directory): HEAD, and objects and refs in the common
    directory (``commondir`` names it; else the directory itself). The common directory."""
    if not os.path.isfile(os.path.join(git_dir, "HEAD")):
        return None
    named = _first_line(os.path.join(git_dir, "commondir"))
    common = os.path.normpath(os.path.join(git_dir, named)) if named else git_dir
    return common if all(os.path.isdir(os.path.join(common, d)) for d in ("objects", "refs")) \
        else None


def _first_line(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="surrogateescape") as f:
            return f.read(4096).strip()
    except OSError:
        return None


def targets(config: Config, project: str) -> list[Target]:
    return resolve(patterns(config, project), project)


def resolve(found: Iterable[str], project: str, strict: bool = True) -> list[Target]:
    """The existing real paths ``found`` names, outermost only, never ``project`` or above it.
    A pattern that globs too far is refused (ConfigError); not ``strict`` (review and
    commit, which an agent-written pattern must never block), passed over."""
    from manager.fs import globwalk

    real_project = os.path.realpath(project) if project else ""
    paths: set[str] = set()
    outside = globwalk.Budget(GLOB_ENTRIES, GLOB_SECONDS)   # shared: the start stays fast
    for pattern in found:
        try:
            expanded = _expand(pattern, project, outside)
        except globwalk.OverBudget:
            if not strict:
                continue
            raise ConfigError(
                f"hide pattern {pattern!r} makes the sandbox's start read more than "
                f"{GLOB_ENTRIES:,} directory entries outside the project (or take over "
                f"{GLOB_SECONDS:g} s): refused", hint="name the paths, or glob below a smaller "
                "directory (`~/.ssh/id_*`, not `/**/id_*`); `workspace config` shows where it "
                "is set") from None
        for path in expanded:
            if os.path.lexists(path):
                paths.add(os.path.realpath(path))
    kept = [p for p in paths if p != "/" and not (real_project and within(real_project, p))]
    kept = [p for p in kept if not any(o != p and within(p, o) for o in kept)]
    return [Target(p, os.path.isdir(p)) for p in sorted(kept)]


def carve(found: list[Target], keep: str) -> list[Target]:
    """``found`` with any target that holds ``keep`` replaced by the entries around the way
    down to it (an engine that must reach its own directory inside the state root)."""
    out: list[Target] = []
    for target in found:
        if not (target.is_dir and within(keep, target.path) and keep != target.path):
            out.append(target)
            continue
        current = target.path
        for part in os.path.relpath(keep, target.path).split("/"):
            try:
                names = sorted(os.listdir(current))
            except OSError:
                break
            for name in names:
                if name != part:
                    path = os.path.join(current, name)
                    out.append(Target(path, os.path.isdir(path) and not os.path.islink(path)))
            current = os.path.join(current, part)
    return out


def _expand(pattern: str, project: str, outside: Budget | None = None) -> list[str]:
    path = absolute(pattern, project)
    if not path or not GLOB_CHARS & set(path):
        return [path] if path else []
    from manager.fs import globwalk

    # Bounded outside the project: an agent-written pattern may name the whole file system.
    # Inside, the walk is the project's own size (Claude's `Read(.env)` is `**/.env` there).
    literal = path[:min(path.index(c) for c in GLOB_CHARS if c in path)].rpartition("/")[0]
    real = os.path.realpath(literal or "/")
    inside = bool(project) and within(real, os.path.realpath(project))
    if inside:
        return globwalk.expand(path, globwalk.Budget(1 << 62, 1e9))
    return globwalk.expand(path, outside or globwalk.Budget(GLOB_ENTRIES, GLOB_SECONDS))


def absolute(pattern: str, project: str) -> str:
    """``pattern`` as an absolute, normalised path or glob ("" when it names nothing):
    ``~`` and ``$VAR`` expanded, relative ones from the project, a trailing ``/**`` (a
    directory's whole tree) the directory itself."""
    path = os.path.expandvars(os.path.expanduser(pattern.strip()))
    if not path:
        return ""
    if not os.path.isabs(path):
        if not project:
            return ""
        path = os.path.join(project, path)
    path = os.path.normpath(path)
    if path.endswith("/**") and not GLOB_CHARS & set(path[:-3]):
        path = path[:-3]
    return path


def within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def never_written(config: Config, project: str) -> list[str]:
    """Where no write of the sandbox may reach the host (review shows none, commit applies
    none): every hidden path, and every named one that does not exist yet. Engines that
    hide by a layer (try's whiteouts, a container's mask over a later path) let a command
    make a file there; it stays in the sandbox."""
    found = patterns(config, project)
    named = [p for pattern in found if not GLOB_CHARS & set(pattern)
             for p in _expand(pattern, project)]
    return sorted({*named, *(t.path for t in resolve(found, project, strict=False))})


# -- Claude Code's own read denials ------------------------------------------------------


def claude_patterns(project: str) -> list[str]:
    """Paths Claude Code denies reading: ``sandbox.filesystem.denyRead`` and ``Read(...)``
    deny rules from every settings file the client reads, as ``hide`` patterns."""
    found: list[str] = []
    for path, base in settings_files(project):
        data = _read_json(path)
        found.extend(p for spec in _read_denials(data) for p in _rule_paths(spec, project))
        found.extend(p for entry in _deny_read(data) for p in _sandbox_paths(entry, base, project))
    return found


def settings_files(project: str) -> list[tuple[str, str]]:
    """(settings file, the directory its relative paths start from), as the client reads them."""
    try:
        drop_ins = sorted(n for n in os.listdir(MANAGED_DROP_INS) if n.endswith(".json"))
    except OSError:
        drop_ins = []
    files = [(MANAGED, os.path.dirname(MANAGED))]
    files += [(os.path.join(MANAGED_DROP_INS, n), MANAGED_DROP_INS) for n in drop_ins]
    user_dir = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    files.append((os.path.join(user_dir, "settings.json"), user_dir))
    if project:
        files += [(os.path.join(project, ".claude", name), os.path.join(project, ".claude"))
                  for name in ("settings.json", "settings.local.json")]
    return files


def _read_json(path: str) -> object:
    from manager import fastjson

    try:
        with open(path, encoding="utf-8") as f:
            return fastjson.loads(f.read())
    except (OSError, ValueError):
        return None   # unreadable: the client reports it


def _read_denials(data: object) -> list[str]:
    """The specifiers of ``Read(...)`` deny rules (``Read`` alone: everything, not hideable)."""
    perms = data.get("permissions") if isinstance(data, dict) else None
    deny = perms.get("deny") if isinstance(perms, dict) else None
    rules = [r.strip() for r in deny if isinstance(r, str)] if isinstance(deny, list) else []
    specs = [r[5:-1].strip() for r in rules if r.startswith("Read(") and r.endswith(")")]
    return [s for s in specs if s not in ("", "*", "**", "**/*")]


def _deny_read(data: object) -> list[str]:
    sandbox = data.get("sandbox") if isinstance(data, dict) else None
    fs = sandbox.get("filesystem") if isinstance(sandbox, dict) else None
    entries = fs.get("denyRead") if isinstance(fs, dict) else None
    return [e for e in entries if isinstance(e, str)] if isinstance(entries, list) else []


def _rule_paths(pattern: str, project: str) -> list[str]:
    """A ``Read(...)`` specifier (manager.claude.pathrules' forms) as hide patterns. A bare
    name matches at any depth: every such name in the project."""
    if pattern.startswith("//"):
        return [pattern[1:]]
    if pattern.startswith("~/"):
        return [pattern]
    if pattern.startswith("/"):
        return [os.path.join(project, pattern[1:])] if project else []
    rel = pattern.removeprefix("./")
    return [rel] if "/" in rel.rstrip("/") else [rel, "**/" + rel]


def _sandbox_paths(entry: str, base: str, project: str) -> list[str]:
    """A ``denyRead`` entry: ``//abs``, ``~/home``, ``/path`` (read both as absolute and
    from the settings file's directory: versions differ, hiding both weakens nothing),
    else relative to the settings file's directory and to the project."""
    if entry.startswith("//") or entry.startswith("~"):
        return [entry[1:] if entry.startswith("//") else entry]
    if entry.startswith("/"):
        return [entry, os.path.join(base, entry[1:])]
    rel = entry.removeprefix("./")
    return [os.path.join(base, rel), *([os.path.join(project, rel)] if project else [])]


# -- the list handed to an engine --------------------------------------------------------

HIDE_FILE = "hide.list"   # in the sandbox: "d PATH" or "f PATH" lines, for the engines' scripts


PATTERNS_FILE = "hide.patterns"   # in the sandbox: one absolute path or glob a line


def write_list(directory: os.PathLike[str] | str, found: list[Target]) -> None:
    """The targets as the overlay holder and the try entry read them: "d PATH" or "f PATH",
    each ended by a NUL (a path may hold any other byte: a line break must not cut it)."""
    data = b"".join(os.fsencode(f"{'d' if t.is_dir else 'f'} {t.path}\0") for t in found)
    _write(directory, HIDE_FILE, data)


def write_patterns(directory: os.PathLike[str] | str, config: Config, project: str) -> None:
    """The patterns behind the list, absolute, each ended by a NUL: the overlay holder checks
    them when it shows what changed in the real project without a fresh sandbox (a new match
    needs one)."""
    found = (absolute(p, project) for p in patterns(config, project))
    _write(directory, PATTERNS_FILE, b"".join(os.fsencode(f"{p}\0") for p in found if p))


def _write(directory: os.PathLike[str] | str, name: str, data: bytes) -> None:
    """The bytes of the names as the file system has them (a name need not be UTF-8)."""
    from pathlib import Path

    from manager.fs.util import write_atomic

    write_atomic(Path(directory) / name, data)   # an entry never reads half
