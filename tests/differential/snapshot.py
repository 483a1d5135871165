"""What a repository and its work tree are, as a comparable value: refs (symbolic ones as
symbolic), HEAD, every work-tree entry (type, mode, owner, extended attributes, content or
link target, empty directories, which names share an inode), status, stash list, reflogs
and fsck."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
from pathlib import Path

from tests.differential.corpus import VOLATILE

# Snapshot keys, the unit a documented difference names.
ASPECTS = ("refs", "head", "tree", "links", "status", "stash", "reflogs", "fsck")


def git(repo: Path, *args: str, check: bool = True) -> str:
    proc = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                          env={**os.environ, "LC_ALL": "C"})
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {repo}: {proc.stderr}")
    return proc.stdout + (proc.stderr if not check else "")


def snapshot(repo: Path) -> dict[str, object]:
    tree, links = _tree(repo)
    return {
        "refs": git(repo, "for-each-ref", "--format=%(refname) %(objectname) %(symref)"),
        "head": git(repo, "symbolic-ref", "-q", "HEAD", check=False).strip()
        or git(repo, "rev-parse", "HEAD").strip(),
        "tree": tree,
        "links": links,
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "stash": git(repo, "stash", "list", "--format=%H %gs"),
        "reflogs": _reflogs(repo / ".git" / "logs"),
        "fsck": _fsck(repo),
    }


def _fsck(repo: Path) -> str:
    proc = subprocess.run(["git", "fsck", "--strict", "--no-dangling", "--no-progress"], cwd=repo,
                          capture_output=True, text=True)
    return f"exit {proc.returncode}\n{proc.stdout}{proc.stderr}"


def _tree(root: Path) -> tuple[dict[str, str], list[list[str]]]:
    """relative path -> "type mode what", and the names that share an inode (hard links)."""
    found: dict[str, str] = {}
    inodes: dict[tuple[int, int], list[str]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == str(root):
            dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in [*dirnames, *filenames]:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            found[rel] = _describe(path, st)
            if not stat.S_ISDIR(st.st_mode):
                inodes.setdefault((st.st_dev, st.st_ino), []).append(rel)
    links = sorted(sorted(names) for names in inodes.values() if len(names) > 1)
    return found, links


def _describe(path: str, st: os.stat_result) -> str:
    mode = f"{stat.S_IMODE(st.st_mode):04o} {st.st_uid}:{st.st_gid}{_xattrs(path)}"
    if stat.S_ISLNK(st.st_mode):
        return f"link -> {os.readlink(path)}"
    if stat.S_ISDIR(st.st_mode):
        return f"dir {mode}"
    if stat.S_ISREG(st.st_mode):
        if any(part in path for part in VOLATILE):
            return f"file {mode} (volatile)"
        digest = hashlib.sha1()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        return f"file {mode} {st.st_size} {digest.hexdigest()[:12]}"
    return f"{stat.S_IFMT(st.st_mode):o} {mode}"      # fifos, sockets


def _xattrs(path: str) -> str:
    """The user's extended attributes (others are the system's: security.*, trusted.*)."""
    names = sorted(n for n in os.listxattr(path, follow_symlinks=False) if n.startswith("user."))
    return "".join(f" {n}={os.getxattr(path, n, follow_symlinks=False)!r}" for n in names)


def _reflogs(logs: Path) -> dict[str, list[str]]:
    """Every reflog (HEAD's too), entry by entry, as git wrote it."""
    found: dict[str, list[str]] = {}
    for dirpath, _, filenames in os.walk(logs):
        for name in filenames:
            path = Path(dirpath, name)
            found[str(path.relative_to(logs))] = path.read_text(errors="replace").splitlines()
    return found
