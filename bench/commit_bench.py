"""Time ``commit`` against ``cp -a`` and binpash/try's commit, in one invocation.

Two sandboxes in binpash/try's layout (``upperdir/<absolute target path>/...``,
ancestors copied up with their real modes) over an empty real target:

* small: 100 directories x 100 files of 300 bytes;
* large: five 100 MB files.

"commit" is the file commit alone; "session commit" is what ``workspace commit``
runs (:func:`manager.commit.session.commit_session`: the history check too).

try's figures, when it is installed: ``try-commit``, its C helper, run on the same
sandbox directory (what ``try commit`` does after its summary), and ``try commit``
itself. ``try-commit`` is honest (every file arrives: ``_check`` counts them), but it
renames each new directory whole (100 renames here; ours too: each new directory is one
journaled tree step, manager/commit/trees.py) and neither journals nor syncs:
"try-commit+sync" adds the ``syncfs`` of the target that our commit's durability costs
(ours also syncs the upper and writes and syncs a journal). Then ``try commit`` itself
(the script: it mounts the sandbox and runs ``:`` first, then summarises and commits).
Each tool runs 3 times per sandbox on a freshly built copy; the build and a
``sync`` are not timed, so every tool starts with the upper data on disk (as an
agent's writes long since are). Prints medians and ratios, of wall time and of CPU
time (user + system, this process's and its children's: on a shared, loaded machine
the CPU figure is the steadier one; neither counts the interpreter's start).

    python bench/commit_bench.py [--dir DIR] [--runs 3] [--only small|large]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from manager.changes.model import Layer  # noqa: E402
from manager.commit.apply import commit  # noqa: E402
from manager.commit.safefs import syncfs  # noqa: E402
from manager.commit.session import Target  # noqa: E402
from manager.commit.session import commit_session  # noqa: E402

MB = 1 << 20


def build_small(top: Path) -> None:
    payload = b"x" * 299 + b"\n"
    for d in range(100):
        folder = top / f"d{d:03}"
        folder.mkdir()
        for f in range(100):
            (folder / f"f{f:03}.txt").write_bytes(payload)


def build_large(top: Path) -> None:
    block = os.urandom(MB)
    for i in range(5):
        with open(top / f"big{i}.bin", "wb") as handle:
            for _ in range(100):
                handle.write(block)


def make_sandbox(work: Path, target: Path, fill: Callable[[Path], None]) -> Path:
    """``work/sandbox/upperdir/<target>`` holding the new files; ancestors copied up."""
    sandbox = work / "sandbox"
    upper = sandbox / "upperdir"
    upper.mkdir(parents=True)
    for real in [*reversed(target.parents)][1:] + [target]:
        copy = upper / str(real).lstrip("/")
        copy.mkdir()
        os.chmod(copy, os.stat(real).st_mode & 0o7777)
    for sub in ("workdir", "temproot"):
        (sandbox / sub).mkdir()
    fill(upper / str(target).lstrip("/"))
    return sandbox


def run_ours(work: Path, sandbox: Path, target: Path) -> None:
    session = work / "session"
    session.mkdir()
    result = commit(session, [Layer(sandbox / "upperdir", Path("/"))], target)
    if not result.ok:
        raise SystemExit(f"commit failed: {result.errors[:3]} {result.conflicts[:3]}")


def run_session(work: Path, sandbox: Path, target: Path) -> None:
    """What ``workspace commit`` runs: the history check as well as the files."""
    session = work / "session"
    session.mkdir()
    done = commit_session(Target(session, target, "bench", 0.0),
                          [Layer(sandbox / "upperdir", Path("/"))], [])
    if not done.ok:
        raise SystemExit(f"commit failed: {done.result.errors[:3]} {done.result.conflicts[:3]}")


def run_cp(work: Path, sandbox: Path, target: Path) -> None:
    source = sandbox / "upperdir" / str(target).lstrip("/")
    subprocess.run(["cp", "-a", f"{source}/.", str(target)], check=True)


def run_try(work: Path, sandbox: Path, target: Path) -> None:
    # `try commit` first mounts the sandbox and runs `:`, then commits; -y skips the prompt.
    subprocess.run(["try", "-y", "commit", str(sandbox)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_try_commit(work: Path, sandbox: Path, target: Path) -> None:
    subprocess.run(["try-commit", str(sandbox)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def run_try_commit_synced(work: Path, sandbox: Path, target: Path) -> None:
    run_try_commit(work, sandbox, target)
    fd = os.open(target, os.O_RDONLY | os.O_DIRECTORY)
    try:
        syncfs(fd)
    finally:
        os.close(fd)


def one_run(base: Path, fill: Callable[[Path], None],
            tool: Callable[[Path, Path, Path], None]) -> tuple[float, float]:
    work = Path(tempfile.mkdtemp(dir=base))
    try:
        target = work / "target"
        target.mkdir()
        sandbox = make_sandbox(work, target, fill)
        os.sync()
        cpu = _cpu()
        start = time.perf_counter()
        tool(work, sandbox, target)
        elapsed = time.perf_counter() - start
        cpu = _cpu() - cpu
        _check(target, fill)
        return elapsed, cpu
    finally:
        shutil.rmtree(work)


def _cpu() -> float:
    own, children = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                       resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _check(target: Path, fill: Callable[[Path], None]) -> None:
    expected = 10_000 if fill is build_small else 5
    found = sum(len(files) for _, _, files in os.walk(target))
    assert found == expected, f"{found} files committed, {expected} expected"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="where to build (default: $TMPDIR)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=("small", "large"), default=None)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="ws-bench-", dir=args.dir))
    tools: dict[str, Callable[[Path, Path, Path], None]] = {"commit": run_ours, "session commit": run_session,
                                                       "cp -a": run_cp}
    if shutil.which("try-commit"):
        tools["try-commit"] = run_try_commit
        tools["try-commit+sync"] = run_try_commit_synced
    if shutil.which("try"):
        tools["try commit"] = run_try
    sizes = {"small": ("10k x 300 B", build_small), "large": ("5 x 100 MB", build_large)}
    try:
        for key, (label, fill) in sizes.items():
            if args.only not in (None, key):
                continue
            runs = {name: [one_run(base, fill, tool) for _ in range(args.runs)]
                    for name, tool in tools.items()}
            _report(label, {name: statistics.median(w for w, _ in r) for name, r in runs.items()},
                    {name: statistics.median(c for _, c in r) for name, r in runs.items()})
    finally:
        shutil.rmtree(base)
    return 0


def _report(label: str, wall: dict[str, float], cpu: dict[str, float]) -> None:
    print(f"\n{label}  (median of runs, seconds)")
    print(f"  {'tool':<16}{'wall':>10}{'vs commit':>12}{'cpu':>10}{'vs commit':>12}")
    for name in wall:
        print(f"  {name:<16}{wall[name]:>10.3f}{wall[name] / wall['commit']:>11.2f}x"
              f"{cpu[name]:>10.3f}{cpu[name] / max(cpu['commit'], 1e-9):>11.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
