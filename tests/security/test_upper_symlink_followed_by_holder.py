"""Attack pass 17 (critical: a host write no one reviewed): the holder follows a symlink the
agent left in the upper directory and changes the mode and owner of any host file it names.

A directory with a mount below it is a *level*: the holder shows it from a skeleton and
mounts one overlay per entry, each with its own upper ``upperdir/<path>``, made by
``Builder.make_upper`` (holder/build.py; levels.py's refresh calls it too): ``if not
current.exists(): mkdir``, then ``os.chmod(current, real mode)`` and ``_chown_like(current,
real)``. ``exists``, ``chmod`` and ``chown`` follow symlinks. While an entry ``NAME`` of a
level does not exist on the host, the agent creates ``LEVEL/NAME`` in the sandbox as a
symlink to any host path (it lands in the level's upper: ``upperdir/LEVEL/NAME -> /any``).
When a directory ``LEVEL/NAME`` then appears on the host (a daemon's runtime directory; a
tool run outside; rootless podman makes ``/run/user/UID/{containers,libpod,netns}`` at its
first passthrough call; the user), the next build (any new holder: after a commit of some
paths, an idle exit, a reboot) and the level's live refresh call ``make_upper`` on that
path: the host file the symlink names gets the new directory's mode and owner, by the
holder, on the host, with no call running and nothing reviewed. Here the target is a secret
key (0600) that becomes 0777: readable and writable by every local user (on the root
account any file: /etc/shadow, /etc/sudoers.d ...).

Reproduction (overlay engine; LEVEL: a directory with a mount below, here ``base/lvl`` with
a tmpfs at ``base/lvl/m``): ``workspace run -- ln -s $SECRET LEVEL/newdir``; on the host
``mkdir -m 0777 LEVEL/newdir``; ``workspace run -- sh -c 'echo b > b'``; ``workspace commit
b`` (the symlink stays pending); ``workspace run -- true``: ``stat -c %a $SECRET`` = 777.

Rule broken: nothing a sandboxed command does reaches the real system until the user reviews
and commits. Rule that would close the class: the engine never follows a link in an upper
directory (the agent writes them): open each component with O_NOFOLLOW / openat2
RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH from the upper's descriptor, fchmod/fchown the
descriptor, and refuse (or remove) an upper entry that is not a directory where the engine
needs one.
"""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from tests.engines import accounts

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]


def _path_without(account: accounts.Account, *tools: str) -> str:
    shadow = account.base / "shadow-bin"
    shadow.mkdir(exist_ok=True)
    for tool in tools:
        (shadow / tool).write_text("#!/bin/sh\nexit 1\n")
        (shadow / tool).chmod(0o755)
    account.chown(shadow, *(shadow / t for t in tools))
    return f"{shadow}:{os.environ.get('PATH', '/usr/bin:/bin')}"


def _account(ids: str, tmp_path: Path) -> tuple[accounts.Account, dict[str, str]]:
    account = accounts.make("self" if ids == "root" else "ordinary", tmp_path)
    env = {"PATH": _path_without(account, "newuidmap", "newgidmap")} \
        if ids == "single-mapping" else {}
    return account, env


@pytest.mark.parametrize("ids", ["root", "single-mapping", "subordinate-ids"])
def test_a_symlink_in_the_upper_never_steers_the_holder(ids: str, tmp_path: Path) -> None:
    account, env = _account(ids, tmp_path)
    level = account.base / "lvl"
    (level / "m").mkdir(parents=True)
    account.chown(level, level / "m")
    secret = account.base / "secret.key"
    secret.write_text("-----BEGIN PRIVATE KEY-----\n")
    account.chown(secret)
    secret.chmod(0o600)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "ws-attack17", str(level / "m")],
                   check=True)
    try:
        made = account.ws("run", "--", "ln", "-s", str(secret), str(level / "newdir"),
                          env=env, timeout=90)
        assert made.returncode == 0, made
        # On the host, a directory appears there (a daemon, a tool run outside, the user).
        (level / "newdir").mkdir()
        account.chown(level / "newdir")
        (level / "newdir").chmod(0o777)
        edit = account.ws("run", "--", "sh", "-c", "echo benign > b", env=env, timeout=90)
        assert edit.returncode == 0, edit
        done = account.ws("commit", "b", env=env, timeout=90)   # the link stays pending
        assert done.returncode == 0, done
        again = account.ws("run", "--", "true", env=env, timeout=90)
        st = secret.lstat()
        assert (stat.S_IMODE(st.st_mode), st.st_uid) == (0o600, account.uid), (
            f"the host file {secret} (0600) is now {stat.S_IMODE(st.st_mode):o} owned by "
            f"{st.st_uid}: the holder followed the agent's symlink in the upper directory "
            f"(make_upper's chmod/chown); last call: {again.returncode} {again.stderr[-500:]!r}")
    finally:
        subprocess.run(["umount", "-l", str(level / "m")], capture_output=True)
        accounts.clean(account)
