"""Drive an interactive command through a real pseudo-terminal, answering its prompts."""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Callable
from pathlib import Path


def converse(argv: list[str], cwd: Path, answers: list[str | Callable[[], str]],
             prompt: bytes = b"]? ", timeout: float = 60) -> tuple[int, str]:
    """Run ``argv`` on a pty; each time ``prompt`` appears, type the next answer (a callable:
    called then, while the prompt waits, for its answer)."""
    master, slave = os.openpty()
    proc = subprocess.Popen(argv, cwd=cwd, stdin=slave, stdout=slave, stderr=slave,
                            close_fds=True, start_new_session=True)
    os.close(slave)
    seen = b""
    pending = list(answers)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:        # the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
                while pending and seen.count(prompt) > len(answers) - len(pending):
                    answer = pending.pop(0)
                    answer = answer if isinstance(answer, str) else answer()
                    os.write(master, answer.encode() + b"\n")
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    return code, seen.decode(errors="replace").replace("\r\n", "\n")
