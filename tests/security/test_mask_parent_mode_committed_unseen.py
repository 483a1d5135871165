"""Attack pass 20 (critical: an unreviewed commit of a host directory's owner and mode): a
mode-only (or owner-only) change of a directory *above* a hidden path is never shown by
review, but ``workspace commit`` applies it.

``manager/session/sandbox.py`` ``pending`` drops ``_holds_a_mask`` changes: a directory whose
only change is its mode or owner and which holds a hidden path (``hide``, workspace's own
state directory) below it is taken for the engine's scaffolding ("the engine made it to hold
the mask's mount point or whiteout ... not the agent. Never shown, never applied"). But the
"never applied" half exists nowhere: ``commit_session`` reads the changes itself
(``read_changes`` over the layers) and excludes only ``never_committed`` (the exclude
patterns, the state directory and the hidden paths *themselves*), so the directory's mode
and, as root, its owner are applied. Every ancestor of a hidden path qualifies: ``$HOME``
(above ``~/.ssh`` and the other default hidden paths), the directories above the state
directory, ``/home``, ``/root`` and ``/`` itself; and the agent's Write tool may write the
project's ``.workspace.yaml`` (an untrusted project file may add to ``hide``), so any
directory of the project too.

Reproduction (as root, overlay engine; HOME and XDG_STATE_HOME in a temp dir T):
``workspace run -- sh -c 'chown 1001:1001 $HOME; chmod 2777 $HOME'``; ``workspace status``
shows no change at all (``--json``: ``"changes": []``) and ``workspace diff`` nothing;
``workspace commit`` says "committed 1 path" and the real ``$HOME`` is now owned by uid 1001,
mode 2777 (another local user owns root's home: any file there is theirs to replace). As an
ordinary user the mode alone: ``chmod 0777 $HOME`` committed unseen (a world-writable home:
any local user replaces ``~/.bashrc``). With ``.workspace.yaml`` holding
``hide: ["sub/secret.txt"]`` (the Write tool), ``chmod 0777 sub`` and the project directory
itself commit unseen the same way.

Rule broken: review shows exactly what commit will do (docs/security.md: "Never shown, never
applied"). Rule that would close the class: one function decides what is a change, and both
review and commit use it: whatever review filters out (``_holds_a_mask``, the ``inside``
filter) commit must filter out too (or review must show it); better, commit applies only the
entries the review record read.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.engines import accounts

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]


def _account(ids: str, tmp_path: Path) -> accounts.Account:
    return accounts.make("self" if ids == "root" else "ordinary", tmp_path)


@pytest.mark.parametrize("where", ["home", "project-hide"])
@pytest.mark.parametrize("ids", ["root", "ordinary"])
def test_a_directory_above_a_hidden_path_is_not_changed_unseen(ids: str, where: str,
                                                               tmp_path: Path) -> None:
    account = _account(ids, tmp_path)
    try:
        home = account.base / "home"
        if where == "home":
            target = home
            home.chmod(0o700)
        else:
            # The agent's Write tool writes the project's .workspace.yaml (a project file may
            # add to `hide`): a path inside the project, so every directory above it counts.
            sub = account.project / "sub"
            sub.mkdir()
            (sub / "secret.txt").write_text("s\n")
            config = account.project / ".workspace.yaml"
            config.write_text('hide: ["sub/secret.txt"]\n')
            account.chown(sub, sub / "secret.txt", config)
            sub.chmod(0o755)
            target = sub
        before = os.lstat(target)
        change = f"chmod 2777 {target}"
        if ids == "root":
            change = f"chown 1001:1001 {target} && " + change
        ran = account.ws("run", "--", "sh", "-c", f"{change} && stat -c '%a %u' {target}",
                         timeout=120)
        assert ran.returncode == 0, ran
        review = json.loads(account.ws("status", "--json", check=True).stdout)
        shown = [c.get("path") for c in review.get("changes", [])]
        diff = account.ws("diff", check=True).stdout
        done = account.ws("commit", timeout=120)
        after = os.lstat(target)
        assert (stat.S_IMODE(after.st_mode), after.st_uid) == \
            (stat.S_IMODE(before.st_mode), before.st_uid) or str(target) in diff \
            or any(str(p).rstrip("/").endswith(target.name) for p in shown), (
                f"{target}: the real directory became mode {stat.S_IMODE(after.st_mode):o} "
                f"owner {after.st_uid} (was {stat.S_IMODE(before.st_mode):o} owner "
                f"{before.st_uid}) though review showed no such change (status: {shown}; "
                f"diff: {diff!r}); commit said: {done.stdout}{done.stderr}")
    finally:
        for path in (account.base / "home", account.project / "sub"):
            if path.exists():
                os.chown(path, account.uid, account.gid)
                path.chmod(0o755)
        accounts.clean(account)
