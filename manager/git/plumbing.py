"""Git plumbing for the guard rails: one place that runs git.

Every call goes through :func:`run` with an explicit environment, so the user's
index, refs and object store are only ever read, and git runs no program that its
configuration names (:func:`host_env`). Writes go to a temporary
index (``GIT_INDEX_FILE``) and to our own object directory
(``GIT_OBJECT_DIRECTORY``), which borrows the user's objects as an alternate.
Work is batched: one subprocess per step, never one per file.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterable
from collections.abc import Iterator
from pathlib import Path

from manager.errors import WorkspaceError
from manager.record import Record
from manager.record import Value

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: see manager.record
if TYPE_CHECKING:
    from typing import Final

# Variables that would point git at another repository, index or object store, or
# give it settings that outrank ours (GIT_CONFIG_*: see host_env).
_SCRUB = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY",
          "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_PREFIX", "GIT_NAMESPACE",
          "GIT_COMMON_DIR", "GIT_QUARANTINE_PATH", "GIT_REPLACE_REF_BASE",
          "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_EXTERNAL_DIFF")
# Settings that name a program for git to run, each given a harmless value on every
# call. The hooks and the CLI run git on the host, and the agent may have written
# git configuration (.git/config and its includes, hooks, attributes). Transports are
# off altogether: a partial clone fetches missing objects through the remote's programs.
NEUTRAL = (("core.fsmonitor", "false"), ("core.hooksPath", "/dev/null"),
           ("core.pager", "cat"), ("core.editor", "true"), ("sequence.editor", "true"),
           ("core.askPass", ""), ("credential.helper", ""), ("core.sshCommand", "false"),
           ("protocol.allow", "never"), ("diff.external", ""), ("commit.gpgSign", "false"),
           ("tag.gpgSign", "false"), ("log.showSignature", "false"), ("gpg.program", "false"),
           ("gpg.openpgp.program", "false"), ("gpg.x509.program", "false"),
           ("gpg.ssh.program", "false"), ("gpg.ssh.defaultKeyCommand", "false"),
           ("core.alternateRefsCommand", ""), ("uploadpack.packObjectsHook", ""))
# ... and the ones under a name the config chooses (filter.<driver>.clean): read first.
_NAMED = r"^(filter|diff|merge|hook)\..*\.(clean|smudge|process|textconv|command|driver)$"
PROGRAM_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "GIT_EDITOR": "true",
                "GIT_SEQUENCE_EDITOR": "true", "GIT_ASKPASS": "true", "SSH_ASKPASS": "true",
                # trace2 files: their targets come from the global config only, which no
                # GIT_CONFIG_KEY overrides; these variables do ("0": off)
                "GIT_TRACE2": "0", "GIT_TRACE2_EVENT": "0", "GIT_TRACE2_PERF": "0"}
_named_cache: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]] = {}
# Settings that keep our scratch work from writing next to the user's index or
# printing advice meant for people.
_CONFIG = ("core.splitIndex=false", "advice.addEmbeddedRepo=false", "advice.addIgnoredFile=false",
           "core.quotePath=false", "gc.auto=0", "maintenance.auto=false")
IDENT = {"GIT_AUTHOR_NAME": "workspace", "GIT_AUTHOR_EMAIL": "workspace@localhost",
         "GIT_COMMITTER_NAME": "workspace", "GIT_COMMITTER_EMAIL": "workspace@localhost"}
GITLINK = "160000"
TREE = "040000"
SYMLINK = "120000"
# A file name that never exists: an empty index for commands that only compare trees.
NO_INDEX = "workspace-no-index"
# Above this many changed paths one ``add -A`` of everything beats a pathspec list.
MAX_PATHSPECS = 500


class GitError(WorkspaceError):
    """A git command failed; ``stderr`` says why."""

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        words = args[:]
        while words[:1] == ["-c"]:          # name the command, not our -c settings
            words = words[2:]
        super().__init__(f"git {' '.join(words[:3])} failed ({returncode}): {stderr.strip()[:500]}")
        self.returncode = returncode
        self.stderr = stderr


class Repo(Value):
    """A user's work tree and where its git data lives."""

    __slots__ = ("worktree", "git_dir", "common_dir")
    worktree: Final[Path]
    git_dir: Final[Path]       # per-worktree git dir (HEAD, index)
    common_dir: Final[Path]    # shared by linked worktrees (objects, refs)

    def __init__(self, worktree: Path, git_dir: Path, common_dir: Path) -> None:
        self.worktree = worktree
        self.git_dir = git_dir
        self.common_dir = common_dir

    @property
    def objects(self) -> Path:
        return self.common_dir / "objects"

    @property
    def index(self) -> Path:
        return self.git_dir / "index"


class Git(Record):
    """git for one repository with a fixed environment (index, object store)."""

    __slots__ = ("repo", "env")

    def __init__(self, repo: Repo, env: dict[str, str] | None = None) -> None:
        self.repo = repo
        self.env = env if env is not None else {}

    def with_env(self, **extra: str) -> Git:
        return Git(self.repo, {**self.env, **extra})

    def run(self, *args: str, input: bytes | None = None, check: bool = True,
            cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
        argv = ["git"]
        for item in _CONFIG:
            argv += ["-c", item]
        argv += list(args)
        env = host_env(self.repo)
        env.update(self.env)
        proc = subprocess.run(argv, input=input, capture_output=True, env=env,
                              cwd=cwd or self.repo.worktree)
        if check and proc.returncode != 0:
            raise GitError(list(args), proc.returncode, proc.stderr.decode(errors="replace"))
        return proc

    def out(self, *args: str, input: bytes | None = None) -> str:
        return self.run(*args, input=input).stdout.decode().strip()

    # -- objects ---------------------------------------------------------------

    def rev(self, name: str) -> str | None:
        proc = self.run("rev-parse", "-q", "--verify", name, check=False)
        return proc.stdout.decode().strip() or None if proc.returncode == 0 else None

    def has_objects(self, ids: Iterable[str]) -> dict[str, bool]:
        """Which of ``ids`` exist (one ``cat-file --batch-check``)."""
        wanted = list(dict.fromkeys(ids))
        if not wanted:
            return {}
        text = self.run("cat-file", "--batch-check=%(objectname)",
                        input="".join(f"{i}\n" for i in wanted).encode()).stdout.decode()
        return {i: not line.endswith(" missing") for i, line in zip(wanted, text.splitlines(),
                                                                       strict=True)}

    def hash_files(self, paths: list[Path]) -> list[str]:
        """Blob ids of ``paths``, written to the object store, in one process."""
        if not paths:
            return []
        data = b"".join(os.fsencode(p) + b"\n" for p in paths)
        ids = self.run("hash-object", "-w", "--no-filters", "--stdin-paths", input=data)
        result = ids.stdout.decode().split()
        if len(result) != len(paths):
            raise WorkspaceError(f"git hash-object gave {len(result)} ids for {len(paths)} files")
        return result

    def empty_tree(self) -> str:
        return self.out("mktree", input=b"")

    def commit_tree(self, tree: str, parents: list[str], message: str,
                    when: float | None = None) -> str:
        args = ["commit-tree", tree]
        for parent in parents:
            args += ["-p", parent]
        env = dict(IDENT)
        if when is not None:
            env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"@{int(when)} +0000"
        return self.with_env(**env).out(*args, input=message.encode())

    def update_ref(self, ref: str, new: str) -> None:
        self.run("update-ref", ref, new)

    def delete_refs(self, refs: list[str]) -> None:
        if refs:
            self.run("update-ref", "--stdin", "-z",
                     input=b"".join(b"delete " + r.encode() + b"\0\0" for r in refs))

    def refs(self, prefix: str) -> list[tuple[str, str]]:
        """(refname, object id) under ``prefix``."""
        text = self.run("for-each-ref", "--format=%(refname) %(objectname)", prefix).stdout
        return [tuple(line.split(" ", 1)) for line in text.decode().splitlines()]  # type: ignore[misc]

    # -- index -----------------------------------------------------------------

    def add_all(self) -> None:
        """``git add -A`` into the current ``GIT_INDEX_FILE``: tracked + untracked, not ignored."""
        self.run("add", "-A", "--ignore-errors", "--", ":/")

    def add_paths(self, paths: list[bytes]) -> None:
        """``git add -A`` limited to ``paths`` (as :meth:`scan` reports them), else everything.

        Pathspec matching costs paths x pathspecs, so a long list falls back to a full
        ``add -A``; so does a path that vanished since the scan (pathspec did not match).
        """
        if len(paths) > MAX_PATHSPECS:
            self.add_all()
            return
        try:
            self.with_env(GIT_LITERAL_PATHSPECS="1").run(
                "add", "-A", "--ignore-errors", "--pathspec-from-file=-", "--pathspec-file-nul",
                input=b"".join(p + b"\0" for p in paths))
        except GitError:
            self.add_all()

    def scan(self) -> Scan:
        """HEAD, and the paths where the work tree differs from the current index.

        One ``git status`` on our own index. The untracked cache is switched on for this
        call only (``-c``, never in a config file): it lives in our index, so directories
        unchanged since the last scan are not read again. Dirty submodule work trees are
        not looked into: like ``add -A``, only a submodule's commit counts.
        """
        # The cache only serves -uall when the config asks for it too (git >= 2.35).
        proc = self.run("-c", "core.untrackedCache=true", "-c", "status.showUntrackedFiles=all",
                        "status", "--porcelain=v2", "-z",
                        "--branch", "--no-ahead-behind", "--untracked-files=all",
                        "--ignored=no", "--no-renames", "--ignore-submodules=dirty")
        return parse_status(proc.stdout)

    def index_info(self, entries: list[tuple[str, str, bytes]]) -> None:
        """Set (mode, blob id, repo-relative path) entries; mode ``0`` removes."""
        if entries:
            data = b"".join(f"{mode} {oid}\t".encode() + path + b"\0"
                            for mode, oid, path in entries)
            self.run("update-index", "-z", "--index-info", input=data)

    def remove_cached(self, paths: list[bytes]) -> None:
        """Drop ``paths`` and everything below them from the index (``git rm -r --cached``)."""
        if paths:
            self.with_env(GIT_LITERAL_PATHSPECS="1").run(
                "rm", "-r", "--cached", "-q", "--ignore-unmatch", "--pathspec-from-file=-",
                "--pathspec-file-nul", input=b"".join(p + b"\0" for p in paths))

    def ignored(self, paths: list[bytes]) -> set[bytes]:
        """Which untracked ``paths`` the repository's ignore rules exclude."""
        if not paths:
            return set()
        proc = self.run("check-ignore", "-z", "--stdin", input=b"".join(p + b"\0" for p in paths),
                        check=False)
        if proc.returncode not in (0, 1):
            raise GitError(["check-ignore"], proc.returncode, proc.stderr.decode(errors="replace"))
        return {p for p in proc.stdout.split(b"\0") if p}

    def ignored_entries(self) -> set[bytes]:
        """Paths in the index that the ignore rules now exclude (tracked ones included)."""
        proc = self.run("ls-files", "-z", "--cached", "--ignored", "--exclude-standard")
        return {p for p in proc.stdout.split(b"\0") if p}

    def write_tree(self) -> str:
        return self.out("write-tree")

    def read_tree(self, tree: str) -> None:
        self.run("read-tree", tree)

    def checkout_paths(self, paths: list[bytes]) -> None:
        """Write ``paths`` from the index into the work tree (modes and links included)."""
        if paths:
            self.run("checkout-index", "-f", "-z", "--stdin",
                     input=b"".join(p + b"\0" for p in paths))

    # -- diffs -----------------------------------------------------------------

    def diff_trees(self, old: str, new: str, renames: bool = True, numstat: bool = True,
                   trees: bool = False) -> list[DiffEntry]:
        """The changes from tree ``old`` to tree ``new`` (one ``diff-tree``); ``trees``
        also lists the subtrees that differ."""
        args = ["diff-tree", "-r", "-z", "--raw", "--no-commit-id"]
        if trees:
            args.append("-t")
        if numstat:
            args.append("--numstat")
        if renames:
            args.append("-M")
        args += [old, new]
        return parse_diff(self.without_index().run(*args).stdout, numstat)

    def without_index(self) -> Git:
        """For commands that need no index but read one anyway: ``diff-tree`` loads it
        (for attributes), and the user's index of a big repository costs more than the diff."""
        return self.with_env(GIT_INDEX_FILE=str(self.repo.git_dir / NO_INDEX))

    def pack_objects(self, ids: list[str], pack_dir: Path) -> None:
        """Copy ``ids`` (readable through alternates) into a pack of our own."""
        if ids:
            pack_dir.mkdir(parents=True, exist_ok=True)
            self.run("pack-objects", "-q", str(pack_dir / "pack"),
                     input="".join(f"{i}\n" for i in ids).encode())


class Scan(Record):
    __slots__ = ("head", "paths")

    def __init__(self, head: str | None, paths: list[bytes]) -> None:
        self.head = head            # None: no commit yet
        self.paths = paths          # modified, deleted, type-changed, unmerged or untracked


def parse_status(data: bytes) -> Scan:
    """Parse ``status --porcelain=v2 -z --branch``: HEAD, and what differs from the index."""
    scan = Scan(None, [])
    records = iter(data.split(b"\0"))
    for record in records:
        kind = record[:2]
        if record.startswith(b"# branch.oid "):
            oid = record[len(b"# branch.oid "):].decode()
            scan.head = None if oid == "(initial)" else oid
        elif kind == b"1 ":
            fields = record.split(b" ", 8)
            if fields[1][1:2] != b".":           # Y: the index against the work tree
                scan.paths.append(fields[8])
        elif kind == b"2 ":                      # not with --no-renames; the old path follows
            fields = record.split(b" ", 9)
            next(records, None)
            if fields[1][1:2] != b".":
                scan.paths.append(fields[9])
        elif kind == b"u ":
            scan.paths.append(record.split(b" ", 10)[10])
        elif kind == b"? ":
            scan.paths.append(record[2:])
    return scan


class DiffEntry(Record):
    __slots__ = ("status", "path", "old_path", "old_mode", "new_mode", "old_id", "new_id",
                 "added", "deleted")

    def __init__(self, status: str, path: bytes, old_path: bytes | None, old_mode: str,
                 new_mode: str, old_id: str, new_id: str, added: int | None = None,
                 deleted: int | None = None) -> None:
        self.status = status            # A, M, D, T, R (renames)
        self.path = path                # the new path (the old one for deletions)
        self.old_path = old_path
        self.old_mode = old_mode
        self.new_mode = new_mode
        self.old_id = old_id
        self.new_id = new_id
        self.added = added              # None: binary
        self.deleted = deleted

    @property
    def submodule(self) -> bool:
        return GITLINK in (self.old_mode, self.new_mode)

    @property
    def is_tree(self) -> bool:
        return TREE in (self.old_mode, self.new_mode)

    @property
    def binary(self) -> bool:
        return self.added is None and not self.submodule

    @property
    def display(self) -> str:
        new = os.fsdecode(self.path)
        return f"{os.fsdecode(self.old_path)} -> {new}" if self.old_path else new


def parse_diff(data: bytes, numstat: bool = True) -> list[DiffEntry]:
    """Parse ``diff-tree -z --raw [--numstat]`` output: raw records, then numstat records."""
    tokens = data.split(b"\0")
    if tokens and tokens[-1] == b"":
        tokens.pop()
    entries: list[DiffEntry] = []
    it = iter(tokens)
    rest: list[bytes] = []
    for token in it:
        if not token.startswith(b":"):
            rest = [token, *it]
            break
        old_mode, new_mode, old_id, new_id, status = token[1:].decode().split(" ")
        first = next(it)
        if status[0] in "RC":
            entries.append(DiffEntry("R", next(it), first, old_mode, new_mode, old_id, new_id))
        else:
            entries.append(DiffEntry(status[0], first, None, old_mode, new_mode, old_id, new_id))
    if numstat:
        _attach_numstat(entries, iter(rest))
    return entries


def _attach_numstat(entries: list[DiffEntry], it: Iterator[bytes]) -> None:
    by_path = {e.path: e for e in entries}
    for token in it:
        added, deleted, path = token.split(b"\t", 2)
        if not path:  # a rename: old and new paths follow
            next(it)
            path = next(it)
        entry = by_path.get(path)
        if entry is not None and added != b"-":
            entry.added, entry.deleted = int(added), int(deleted)


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(PROGRAM_ENV)
    env["LC_ALL"] = "C"
    return env


def host_env(repo: Repo | None = None) -> dict[str, str]:
    """The environment for any git run on the host: ``repo``'s (when given), with every
    setting that would run a program neutralised (given as GIT_CONFIG_KEY_n/VALUE_n: a
    driver's name may hold a ``=``, which ``-c`` cannot pass)."""
    env = _base_env()
    pairs = list(NEUTRAL)
    if repo is not None:
        env.update({"GIT_DIR": str(repo.git_dir), "GIT_WORK_TREE": str(repo.worktree)})
        pairs += _named_programs(repo, env)
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    return env


def discovering_env() -> dict[str, str]:
    """:func:`host_env` with no other ``GIT_`` variable of the caller's: for a git that
    finds its repository from its working directory (the review's questions)."""
    return {k: v for k, v in host_env().items()
            if not k.startswith("GIT_") or k.startswith("GIT_CONFIG_") or k in PROGRAM_ENV}


def start_in(directory: Path, *args: str) -> subprocess.Popen[bytes]:
    """git ``args`` started in ``directory`` (:func:`discovering_env`), stdin and stdout
    piped, stderr dropped: a question asked while the caller goes on."""
    return subprocess.Popen(["git", "-c", "core.quotePath=false", *args], cwd=directory,
                            env=discovering_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def run_in(directory: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """git ``args`` run in ``directory`` (:func:`discovering_env`), output captured."""
    return subprocess.run(["git", "-c", "core.quotePath=false", *args], capture_output=True,
                          cwd=directory, env=discovering_env())


def _named_programs(repo: Repo, env: dict[str, str]) -> list[tuple[str, str]]:
    """Empty commands for the drivers the config defines (a filter is also made optional),
    read again whenever a config file it came from changed: the repository's own, and every
    file git read for it (an ``include.path`` may name a file of the work tree, which the
    agent's Write tool edits; the resident service lives across many hooks)."""
    cached = _named_cache.get(str(repo.git_dir))
    if cached is not None and all(_stamp(Path(p)) == s for p, s in cached[0]):
        return cached[1]
    started = time.time_ns()
    proc = subprocess.run(["git", "config", "-z", "--list", "--name-only", "--show-origin"],
                          capture_output=True, env=env, cwd=repo.worktree)
    if proc.returncode not in (0, 1):
        raise GitError(["config"], proc.returncode, proc.stderr.decode(errors="replace"))
    tokens = proc.stdout.decode(errors="surrogateescape").split("\0")
    origins = {str(repo.git_dir / "config"), str(repo.common_dir / "config")}
    found: list[tuple[str, str]] = []
    for origin, name in zip(tokens[0::2], tokens[1::2], strict=False):
        if origin.startswith("file:"):
            origins.add(os.path.abspath(os.path.join(repo.worktree, origin[len("file:"):])))
        if re.match(_NAMED, name) and (name, "") not in found:
            found.append((name, ""))
            if name.startswith("filter."):
                found.append((name.rpartition(".")[0] + ".required", "false"))
    stamps = [(p, _stamp(Path(p))) for p in sorted(origins)]
    # A file written in the same instant as the read may have changed after it: not kept.
    if all(s == "-" or int(s.split(":")[1]) < started for _, s in stamps):
        _named_cache[str(repo.git_dir)] = (stamps, found)
    return found


def _stamp(path: Path) -> str:
    try:
        st = os.stat(path)
    except OSError:
        return "-"
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def discover(path: Path) -> Repo | None:
    """The git work tree containing ``path``, or None (not a repository, bare, or no git)."""
    env = host_env()
    try:
        proc = subprocess.run(["git", "rev-parse", "--show-toplevel", "--absolute-git-dir",
                               "--git-common-dir"], cwd=path, capture_output=True, env=env)
    except (FileNotFoundError, NotADirectoryError):
        return None
    lines = proc.stdout.decode().splitlines()
    if proc.returncode != 0 or len(lines) != 3:
        return None
    top, git_dir, common = lines
    common_path = Path(common) if os.path.isabs(common) else Path(path, common)
    return Repo(Path(top), Path(git_dir), common_path.resolve())
