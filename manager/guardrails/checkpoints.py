"""Checkpoints: shadow commits of the project's whole state, in the store beside ``.git``.

A session's work goes into *streams*: each a chain of checkpoint commits whose
root parent is the base commit (HEAD when the stream began), held by the store
ref ``refs/ws/<session>/<n>-<base>``. Each checkpoint's tree is a snapshot made
from scratch (no ghost files); when the overlay holds changes, the real work
tree's own tree is kept too (ref ``refs/ws-w/<session>/<id>``) so a rewind can
restore both exactly.

Objects a checkpoint needs that are not reachable from the base commit are
copied into the store, so the user's ``git gc --prune=now`` cannot take them.
Their state is :class:`manager.guardrails.state.Checkpoints`.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from manager.errors import WorkspaceError
from manager.git.plumbing import GITLINK
from manager.git.plumbing import DiffEntry
from manager.git.plumbing import Git
from manager.guardrails.budget import ref_safe
from manager.guardrails.shadow import Shadow
from manager.guardrails.shadow import Snapshot
from manager.guardrails.shadow import head_tree

if TYPE_CHECKING:
    from manager.guardrails.state import Checkpoint
    from manager.guardrails.state import Checkpoints
    from manager.guardrails.state import Stream

STREAMS = "refs/ws/"
WORKTREES = "refs/ws-w/"
ZERO = "0" * 40


def fresh_state() -> Checkpoints:
    return {"next_id": 1, "next_stream": 1, "stream": None, "items": []}


def stream_ref(session_id: str, n: int, base: str | None) -> str:
    """The ref of stream ``n`` on ``base``."""
    return f"{STREAMS}{ref_safe(session_id)}/{n}-{base or 'root'}"


def current_ref(session_id: str, state: Checkpoints) -> str | None:
    """The ref of the session's current stream, if it has one."""
    stream = state["stream"]
    return None if stream is None else stream_ref(session_id, stream["n"], stream["base"])


def worktree_prefix(ref: str) -> str:
    """Where a stream's work-tree trees are kept: ``refs/ws-w/<session>/<n>/``."""
    owner, name = ref[len(STREAMS):].rsplit("/", 1)
    return f"{WORKTREES}{owner}/{name.split('-', 1)[0]}/"


# -- taking one ------------------------------------------------------------------


def create(shadow: Shadow, session_id: str, state: Checkpoints, snap: Snapshot,
           message: str, auto: bool) -> Checkpoint | None:
    """Record ``snap`` as a checkpoint; None when nothing changed since the last one."""
    stream = _current_stream(state, snap)
    if stream["tip"] and snap.view == stream["tip_tree"]:
        return None                     # decided without running git
    base_tree = _base_tree(shadow, stream)
    parent_tree = stream["tip_tree"] or base_tree
    if snap.view == parent_tree and (auto or stream["tip"]):
        return None
    git = shadow.store()
    parents = [p for p in (stream["tip"] or stream["base"],) if p]
    commit = git.commit_tree(snap.view, parents, message or "checkpoint")
    ref = stream_ref(session_id, stream["n"], stream["base"])
    entries = git.diff_trees(parent_tree, snap.view, trees=True)
    _retain(shadow, entries, [commit, snap.view])
    if snap.worktree != snap.view:
        _retain(shadow, git.diff_trees(snap.view, snap.worktree, renames=False, numstat=False,
                                       trees=True), [snap.worktree])
        git.update_ref(f"{worktree_prefix(ref)}{state['next_id']}", snap.worktree)
    git.update_ref(ref, commit)
    item = _item(state, stream, commit, snap, entries, message, auto)
    stream["tip"], stream["tip_tree"] = commit, snap.view
    stream["files"] = _changed_paths(git, base_tree, snap.view)
    return item


def _current_stream(state: Checkpoints, snap: Snapshot) -> Stream:
    stream = state.get("stream")
    if stream is None or stream["base"] != snap.head:
        stream = {"n": state["next_stream"], "base": snap.head, "tip": None, "tip_tree": None,
                  "files": []}
        state["next_stream"] += 1
        state["stream"] = stream
    return stream


def _base_tree(shadow: Shadow, stream: Stream) -> str:
    """The base commit's tree, looked up once per stream."""
    if not stream.get("base_tree"):
        stream["base_tree"] = head_tree(shadow, stream["base"])
    return str(stream["base_tree"])


def _item(state: Checkpoints, stream: Stream, commit: str, snap: Snapshot,
          entries: list[DiffEntry], message: str, auto: bool) -> Checkpoint:
    blobs = [e for e in entries if not e.is_tree]
    item: Checkpoint = {"id": state["next_id"], "commit": commit, "tree": snap.view,
            "worktree": snap.worktree, "base": stream["base"], "stream": stream["n"],
            "time": time.time(), "files": len(blobs),
            "lines": sum((e.added or 0) + (e.deleted or 0) for e in blobs),
            "message": message, "auto": auto}
    state["next_id"] += 1
    state["items"].append(item)
    return item


def _changed_paths(git: Git, old: str, new: str) -> list[str]:
    return sorted(os.fsdecode(e.path) for e in
                  git.diff_trees(old, new, renames=False, numstat=False))


def _retain(shadow: Shadow, entries: list[DiffEntry], extra: list[str]) -> None:
    """Copy into the store the new objects it does not hold yet (from the user's store)."""
    ids = [e.new_id for e in entries if e.status != "D" and e.new_mode != GITLINK
           and e.new_id != ZERO] + extra
    present = shadow.local().has_objects(ids)
    missing = [i for i, ok in present.items() if not ok]
    shadow.store().pack_objects(missing, shadow.objects / "pack")


# -- listing and finding ---------------------------------------------------------


def live_streams(shadow: Shadow) -> dict[str, str]:
    """Every stream ref in the store and its tip."""
    return dict(shadow.store().refs(STREAMS))


def listing(shadow: Shadow, session_id: str, state: Checkpoints) -> list[Checkpoint]:
    """The session's checkpoints whose stream still exists, oldest first."""
    live = live_streams(shadow)
    result = []
    for item in state.get("items", []):
        ref = stream_ref(session_id, item["stream"], item["base"])
        if ref in live:
            result.append(item)
    return result


def find(items: list[Checkpoint], ident: str) -> Checkpoint:
    """A checkpoint by number or by a commit-id prefix (at least 4 hex digits)."""
    for item in items:
        if ident.isdigit() and item["id"] == int(ident):
            return item
    if len(ident) >= 4:
        matches = [i for i in items if i["commit"].startswith(ident.lower())]
        if len(matches) == 1:
            return matches[0]
    raise WorkspaceError(f"no checkpoint {ident!r} in this session",
                         hint="`workspace checkpoints` lists them")


# -- overlap detection ------------------------------------------------------------


def continue_or_fresh(shadow: Shadow, state: Checkpoints, snap: Snapshot) -> str | None:
    """At prompt start: keep the stream, or close it so the next checkpoint starts afresh.

    Fresh when HEAD moved, the work tree is clean against the base, or every
    changed path is unrelated to the stream's files. Returns why it closed.
    """
    stream = state.get("stream")
    if stream is None:
        return None
    reason = _fresh_reason(shadow, stream, snap)
    if reason:
        state["stream"] = None
    return reason


def _fresh_reason(shadow: Shadow, stream: Stream, snap: Snapshot) -> str | None:
    if stream["base"] != snap.head:
        return "HEAD moved since the stream began"
    changed = _changed_paths(shadow.work(), _base_tree(shadow, stream), snap.view)
    if not changed:
        return "the work tree is clean"
    if stream["files"] and not set(changed) & set(stream["files"]):
        return "the pending changes are unrelated to the stream's files"
    return None


def others_on_base(shadow: Shadow, session_id: str, head: str | None) -> list[str]:
    """Other sessions whose streams on ``head`` hold changes not in HEAD."""
    if head is None:
        return []
    base_tree = head_tree(shadow, head)
    text = shadow.store().run("for-each-ref", "--format=%(refname) %(tree)", STREAMS).stdout
    mine = ref_safe(session_id)
    found = []
    for line in text.decode().splitlines():
        ref, tree = line.split(" ")
        owner, name = ref[len(STREAMS):].rsplit("/", 1)
        if owner != mine and name.endswith(f"-{head}") and tree != base_tree:
            found.append(owner.replace("_2E", "."))
    return sorted(set(found))


# -- pruning and the size cap -----------------------------------------------------


@dataclass
class PruneReport:
    removed: list[str]
    size_before: int
    size_after: int


def store_size(shadow: Shadow) -> int:
    total = 0
    for dirpath, _, names in os.walk(shadow.objects):
        for name in names:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                continue
    return total


def prune(shadow: Shadow, streams: list[str], now: bool = False) -> None:
    """Drop stream refs (with their work-tree refs), then collect the store."""
    git = shadow.store()
    doomed = list(streams)
    for ref in streams:
        doomed += [r for r, _ in git.refs(worktree_prefix(ref))]
    git.delete_refs(doomed)
    gc(shadow, now)


def gc(shadow: Shadow, now: bool = False) -> None:
    """Pack what the store's refs reach; drop unreachable loose objects.

    Without ``now``, objects younger than an hour stay: a concurrent snapshot may
    have written them and not referenced them yet.
    """
    git = shadow.store()
    git.run("repack", "-a", "-d", "-l", "-q")
    git.run("prune", "--expire=now" if now else "--expire=1.hour.ago")
    _clean_tmp(shadow, time.time() - 3600)


# Per-process scratch files in the store's tmp/ (index-cache.* are kept: one per work tree).
_SCRATCH = ("index.", "cache.", "note.", "blob.")


def _clean_tmp(shadow: Shadow, cutoff: float) -> None:
    """Scratch files left by killed processes (and leaked cache links of earlier releases).

    Only old ones: a concurrent snapshot may be using a new one right now (ctime: a
    fresh hard link to an old index counts as new).
    """
    for path in shadow.tmp.glob("*") if shadow.tmp.is_dir() else []:
        with contextlib.suppress(OSError):
            if path.name.startswith(_SCRATCH) and path.lstat().st_ctime < cutoff:
                path.unlink()


def stale_streams(shadow: Shadow, max_age_days: float, alive_ids: set[str]) -> list[str]:
    """Stream refs idle longer than ``max_age_days`` or whose session is gone."""
    text = shadow.store().run("for-each-ref", "--format=%(refname) %(committerdate:unix)",
                              STREAMS).stdout
    alive = {ref_safe(i) for i in alive_ids}
    cutoff = time.time() - max_age_days * 86400
    stale = []
    for line in text.decode().splitlines():
        ref, when = line.split(" ")
        owner = ref[len(STREAMS):].rsplit("/", 1)[0]
        if owner not in alive or int(when or 0) < cutoff:
            stale.append(ref)
    return stale


def enforce_cap(shadow: Shadow, max_bytes: int, keep: set[str]) -> list[str]:
    """Over the cap: collect, then drop the oldest streams (not ``keep``) until under it."""
    if store_size(shadow) <= max_bytes:
        return []
    gc(shadow)
    removed: list[str] = []
    for ref in _oldest_first(shadow):
        if store_size(shadow) <= max_bytes:
            break
        if ref in keep:
            continue
        prune(shadow, [ref], now=True)
        removed.append(ref)
    return removed


def _oldest_first(shadow: Shadow) -> list[str]:
    text = shadow.store().run("for-each-ref", "--sort=committerdate", "--format=%(refname)",
                              STREAMS).stdout
    return text.decode().split()


def session_streams(shadow: Shadow, session_id: str) -> list[str]:
    return [ref for ref, _ in shadow.store().refs(f"{STREAMS}{ref_safe(session_id)}/")]
