"""Attack pass 9: Read's private copy of the sandbox's file (claude/readcopy.take) checks
the size once (fstat, at most 64 MiB), then copies with sendfile until EOF. The sandbox
keeps the file: a process left running sees the hook start reading (the upper inode's
atime, which the sandbox's stat shows, moves on the first read) and extends the file at
once with ftruncate (a Bash call run in the background, as the client's
``run_in_background`` does: the overlay engine's per-call pid namespace lives while it
runs) (a sparse hole: nothing on the sandbox's side). The hook copies the
whole new length into the session's state as real bytes on the host: here 1 GiB for a
file the check passed at 60 MiB, as much as the host disk holds with a larger number, and
the Read call stalls while it copies. Rule broken: the sandbox's limits bound its cost on
the host (pass 8 gave diff the same rule: "diff stops reading a file that grows past its
limit"); nothing the agent writes can stall the hook."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from tests.claude.conftest import Claude

GROW = """python3 - <<'EOF'
import os, time
f = "big.bin"
os.truncate(f, 60 << 20)
os.utime(f, (0, time.time()))
print("ready", flush=True)
end = time.time() + 60
while os.stat(f).st_atime == 0 and time.time() < end:
    pass
os.truncate(f, 1 << 30)
print("grown", flush=True)
EOF
"""


def test_read_copies_no_more_than_it_checked(project: Path, tmp_path: Path):
    claude = Claude(project, tmp_path)
    claude.start()
    assert claude.bash("truncate -s 0 big.bin").returncode == 0
    answer = claude.pre_bash(GROW, run_in_background=True)
    assert "updatedInput" in answer.spec, answer.json
    escaped = answer.command.replace("'", "'\"'\"'")
    background = subprocess.Popen(["/bin/bash", "-c", f"eval '{escaped}'"], cwd=claude.cwd,
                                  env=dict(claude.env, PWD=claude.cwd), stdout=subprocess.PIPE)
    assert background.stdout is not None
    assert background.stdout.readline() == b"ready\n"
    started = time.monotonic()
    answer = claude.hook("PreToolUse", {"tool_name": "Read", "permission_mode": "bypassPermissions",
                                        "tool_use_id": "toolu_r",
                                        "tool_input": {"file_path": str(project / "big.bin")}})
    took = time.monotonic() - started
    assert answer.returncode == 0, answer.stderr
    handed = str(answer.spec.get("updatedInput", {}).get("file_path", ""))
    size = os.stat(handed).st_size if handed and os.path.exists(handed) else 0
    blocks = os.stat(handed).st_blocks * 512 if size else 0
    background.kill()
    background.wait()
    assert handed, answer.spec
    assert size <= 64 << 20, (f"the hook copied {size >> 20} MiB ({blocks >> 20} MiB on disk) "
                              f"in {took:.1f} s", answer.spec)
