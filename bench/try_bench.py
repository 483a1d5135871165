"""Per-call cost of the try engine (our entry included) against try called directly.

Usage: python bench/try_bench.py [--runs N] [--try PATH ...]

Both run ``true`` in a reused sandbox, in the same invocation, interleaved so
that drift hits both alike; ``bash -c true`` is the floor. Target: our wrapper
adds at most 10 ms to a direct ``try -N DIR true`` (``-D`` for try v0.2.0).
try's own mounts vary by tens of ms from call to call here, so the wrapper is
also timed over a stub ``try`` that only runs its line: that figure decides.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from manager.engines.try_ import layout as try_layout  # noqa: E402
from manager.engines.try_ import probe as try_probe  # noqa: E402
from manager.fs import util as fsutil  # noqa: E402

TARGET_MS = 10.0


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    rc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode
    elapsed = time.perf_counter() - start
    if rc != 0:
        raise SystemExit(f"{argv[:3]}... exited {rc}")
    return elapsed


STUB = '#!/bin/sh\n# stands in for try: runs its line with no mounts at all\nshift 2\neval "$1"\n'


def bench_one(path: Path, runs: int) -> dict[str, float]:
    info = try_probe.inspect(path)
    with tempfile.TemporaryDirectory(prefix="try-bench-") as tmp:
        root = Path(tmp)
        for name in ("direct", "ours", "stub", "tmp"):
            (root / name).mkdir()
        try_layout.make_layout(root / "ours")
        try_layout.make_layout(root / "stub")
        stub = root / "stub-try"
        stub.write_text(STUB)
        stub.chmod(0o755)
        stub_info = try_probe.TryInfo(str(stub), info.flag, "stub", 0, 0)
        # try leaves mktemp files behind: keep them in the scratch dir.
        env = dict(os.environ, TRY_SHELL="/bin/bash", TMPDIR=str(root / "tmp"))
        cases = {
            "bash -c true": ["bash", "-c", "true"],
            f"try {info.flag} DIR true": [str(path), info.flag, str(root / "direct"), "true"],
            "try engine entry, true": try_layout.entry_command(root / "ours", "bench", info, "/",
                                                              None, "true"),
            "stub try direct": [str(stub), info.flag, str(root / "stub"), "true"],
            "entry over stub try": try_layout.entry_command(root / "stub", "bench", stub_info,
                                                           "/", None, "true"),
        }
        for argv in cases.values():  # warm-up: first calls create the sandbox layout
            timed(argv, env)
        samples: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(runs):
            for name, argv in cases.items():
                samples[name].append(timed(argv, env))
        fsutil.remove_tree(root)
        root.mkdir()  # TemporaryDirectory expects to remove it
    names = list(cases)
    result = {name: statistics.median(values) * 1000 for name, values in samples.items()}
    # Paired per round: the drift of this machine's mount calls cancels out.
    result["adds, with real try"] = _paired(samples[names[2]], samples[names[1]])
    result["adds, wrapper alone"] = _paired(samples[names[4]], samples[names[3]])
    return result


def _paired(ours: list[float], theirs: list[float]) -> float:
    return statistics.median(a - b for a, b in zip(ours, theirs, strict=True)) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--try", dest="scripts", action="append", default=[],
                        help="a try script (repeatable; default: try on PATH)")
    args = parser.parse_args()
    scripts = [Path(s) for s in args.scripts] or [try_probe.find("")]
    worst = 0.0
    for path in scripts:
        if path is None:
            raise SystemExit("try not found: put it on PATH or pass --try PATH")
        info = try_probe.inspect(path)
        result = bench_one(path, args.runs)
        worst = max(worst, result["adds, wrapper alone"])
        print(f"\n{path} ({info.form}), medians of {args.runs} interleaved rounds")
        print(f"  {'case':<28} {'ms':>8}")
        for name, ms in result.items():
            print(f"  {name:<28} {ms:8.1f}")
        print(f"  target: our wrapper adds <= {TARGET_MS:.0f} ms")
    return 0 if worst <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
