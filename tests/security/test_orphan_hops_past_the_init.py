"""Attack pass 13 (minor): a process a call leaves behind hops from pid to pid past the
session's init, which ends orphans only one generation a round, and lives on for good.

The init (holder/session_init.py ``_serve``) wakes every 0.2 s, lists its own children and
sends each SIGKILL. An orphan that forks its successor first and exits a few milliseconds
later is always ahead of it: when the init kills the one it listed, that one's child is
re-parented to the init after the list was taken, forks the next, and so on. Any account,
subordinate ids too. The chain is listed by ``workspace status`` (pids that change at every
look), so review says something runs; but "nothing of a call outlives it" does not hold: it
writes the sandbox whenever it likes, commit and discard refuse while it runs, and the holder
never goes idle (``others_in_namespace``), so no fresh call ends it: only a kill of the
holder by hand does.

Reproduction (wstest with subordinate ids): a call runs
  python3 -c 'import os,time
  if os.fork(): os._exit(0)
  while True:
      if os.fork(): time.sleep(0.03); os._exit(0)' &
then `workspace status --json` keeps listing (new) running pids, 5, 10, 15 s later.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.engines import accounts

pytestmark = [pytest.mark.engine, pytest.mark.needs_root]

LIFE = 25   # seconds the chain lives, so that a failing run ends by itself

HOP = f"""/usr/bin/python3 - >/dev/null 2>&1 <<'EOF' &
import os, time
t0 = time.time()
if os.fork():
    os._exit(0)
os.setsid()
while time.time() - t0 < {LIFE}:
    if os.fork():           # the parent lives a little, then leaves its child to the init
        time.sleep(0.03)
        os._exit(0)
EOF
echo started
"""


def left_by(account: accounts.Account, script: str, said: str) -> None:
    """Run ``script`` as a call, which prints ``said`` once it has left something running."""
    call = account.ws("run", "--", "bash", "-c", script, timeout=60)
    assert said in call.stdout, call


def nothing_of_a_finished_call_runs(kind: str, tmp_path, script: str, said: str) -> None:
    """``script`` leaves something behind (:func:`left_by`); 6 s later (thirty rounds of the
    init's) nothing of the session may still run."""
    account = accounts.make(kind, tmp_path)
    try:
        left_by(account, script, said)
        time.sleep(6)
        running = json.loads(account.ws("status", "--json", check=True).stdout).get("running")
        assert not running, f"a finished call's processes still run 6 s later: {running}"
    finally:
        accounts.clean(account)


@pytest.mark.parametrize("kind", accounts.KINDS)
def test_no_orphan_of_a_finished_call_outlives_the_inits_rounds(kind: str, tmp_path) -> None:
    nothing_of_a_finished_call_runs(kind, tmp_path, HOP, "started")
