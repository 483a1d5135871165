"""Attack pass 11: the guard rails' snapshot limit is per file: many sparse files just under
it stall the prompt hook as one large one did.

Attack pass 10's rule leaves a file over ``SNAPSHOT_FILE_LIMIT`` (then 256 MiB) out of the snapshot
(guardrails/shadow.py). ``for i in $(seq 200); do truncate -s 256M f$i; done`` costs the
sandbox no block either, and each file is at the limit, not over it: the UserPromptSubmit hook
(and Stop's) hashes them all, 50 GiB of zeros read and deflated by ``git hash-object`` on the
host, past every timeout, and again at each prompt and each stop. Rule broken: nothing the
agent writes can stall the sandbox's hooks (promise 5); pass 10's rule (a sparse file costs
the host no more than it costs the sandbox) fails on a new route: a total, not a per-file
bound, is what holds.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from manager.guardrails import shadow
from tests.claude.conftest import Claude
from tests.security.test_checkpoint_sparse_file import prompt_hook_seconds

COUNT = 200
WITHIN_S = 30


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=project,
                   check=True, capture_output=True)


def test_many_sparse_files_at_the_limit_do_not_stall_the_prompt_hook(claude: Claude,
                                                                      project: Path) -> None:
    _git(project, "init", "-q")
    _git(project, "add", "-A")
    _git(project, "commit", "-qm", "base")
    claude.start()
    size = shadow.SNAPSHOT_FILE_LIMIT
    made = claude.bash(f"for i in $(seq {COUNT}); do truncate -s {size} f$i.bin; done")
    assert made.returncode == 0, made.stderr
    took = prompt_hook_seconds(claude, project, WITHIN_S)
    assert took is not None, (f"UserPromptSubmit still ran after {WITHIN_S} s: the snapshot reads "
                              f"{COUNT} sparse files of {size >> 20} MiB each the sandbox made "
                              "(they cost the sandbox no block)")
