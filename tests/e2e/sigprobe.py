"""A process that records what happens to it, for observing how Claude Code kills commands.

Usage: ``python3 sigprobe.py LOG SECONDS TAG [stay|exit]``

Appends JSON lines to LOG: one ``start`` record (pid, ppid, pgid, sid, cwd), one per catchable
signal received (SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGPIPE), and ``end`` when SECONDS
pass. With ``stay`` (default) it ignores those signals, so only SIGKILL stops it; with ``exit`` it
exits on the first one. Every 20 ms it writes the time to ``LOG.alive-TAG``, so a test can tell
when it died.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from types import FrameType
from typing import Any

CAUGHT = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGPIPE,
)


def main(argv: list[str]) -> int:
    log, seconds, tag = argv[0], float(argv[1]), argv[2]
    mode = argv[3] if len(argv) > 3 else "stay"

    def write(**record: Any) -> None:
        record.update(t=time.time(), pid=os.getpid(), tag=tag)
        with open(log, "a") as f:
            f.write(json.dumps(record) + "\n")

    def on_signal(signum: int, frame: FrameType | None) -> None:
        write(signal=signal.Signals(signum).name)
        if mode == "exit":
            os._exit(128 + signum)

    for sig in CAUGHT:
        signal.signal(sig, on_signal)
    write(start=True, ppid=os.getppid(), pgid=os.getpgid(0), sid=os.getsid(0), cwd=os.getcwd())
    end = time.time() + seconds
    while time.time() < end:
        time.sleep(0.02)
        alive = f"{log}.alive-{tag}"
        with open(alive + ".tmp", "w") as f:
            f.write(str(time.time()))
        os.replace(alive + ".tmp", alive)  # atomic: a kill never leaves it empty
    write(end=True)
    print(f"sigprobe {tag} finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
