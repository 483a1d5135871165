#!/usr/bin/env python3
"""Per-call cost of running one trivial command through each container path (median of N).

    python3 bench/container_percall.py [-n 20] [--image workspace-sandbox:latest]

Needs dockerd and/or podman (scripts/setup.d/30-containers.sh). Paths whose engine is missing are
reported as skipped. `bash -c true` is the same-invocation baseline. Optional: --pow VENV_PYTHON
measures python-on-whales (import time and per-exec) in that interpreter.
"""
import argparse
import shutil
import statistics
import subprocess
import sys
import time


def median_ms(fn, n):
    fn()  # warm-up
    xs = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        xs.append((time.perf_counter() - t) * 1000)
    return statistics.median(xs), min(xs), max(xs)


def run(*argv):
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--image", default="workspace-sandbox:latest")
    ap.add_argument("--pow", help="python interpreter with python-on-whales installed")
    a = ap.parse_args()
    rows = []

    def bench(name, fn):
        try:
            med, lo, hi = median_ms(fn, a.n)
            rows.append((name, f"{med:8.1f}", f"{lo:8.1f}", f"{hi:8.1f}"))
        except Exception as e:  # report, keep going
            rows.append((name, "skipped", "", str(e)[:60]))

    bench("bash -c true (baseline)", lambda: run("bash", "-c", "true"))
    started = []
    try:
        for engine in ("docker", "podman"):
            if not shutil.which(engine):
                rows.append((f"{engine}: *", "skipped", "", "not installed"))
                continue
            ctr = f"ws-bench-{engine}"
            subprocess.run([engine, "rm", "-f", ctr], capture_output=True)
            run(engine, "run", "-d", "--name", ctr, "--network", "none", a.image)
            started.append((engine, ctr))
            bench(f"{engine} exec CTR true", lambda: run(engine, "exec", ctr, "true"))
            bench(f"{engine} exec CTR ws-exec -- true", lambda: run(engine, "exec", ctr, "ws-exec", "--", "true"))
            for alt in ("/usr/bin/docker",) if engine == "docker" and shutil.which("docker") != "/usr/bin/docker" else ():
                bench(f"{alt} exec CTR true", lambda: run(alt, "exec", ctr, "true"))
            bench(f"{engine} run --rm IMG true",
                  lambda: run(engine, "run", "--rm", "--network", "none", a.image, "true"))
            if engine == "docker":
                try:
                    import docker  # noqa: PLC0415
                    t = time.perf_counter()
                    client = docker.from_env()
                    api = client.api
                    rows.append(("docker SDK from_env()", f"{(time.perf_counter()-t)*1000:8.1f}", "", "once"))

                    def sdk_exec():
                        ex = api.exec_create(ctr, ["true"])
                        api.exec_start(ex["Id"])
                        if api.exec_inspect(ex["Id"])["ExitCode"] != 0:
                            raise RuntimeError("exit != 0")

                    def sdk_exec_no_inspect():
                        ex = api.exec_create(ctr, ["true"])
                        api.exec_start(ex["Id"])

                    bench("docker SDK exec_create+start", sdk_exec_no_inspect)
                    bench("docker SDK exec_create+start+inspect", sdk_exec)
                except ImportError:
                    rows.append(("docker SDK", "skipped", "", "docker package missing"))
                if a.pow:
                    code = (
                        "import time,statistics,sys;t=time.perf_counter();"
                        "from python_on_whales import DockerClient;"
                        "print('import', (time.perf_counter()-t)*1000);"
                        f"d=DockerClient();d.execute('{ctr}',['true']);xs=[]\n"
                        f"for _ in range({a.n}):\n"
                        f" t=time.perf_counter();d.execute('{ctr}',['true']);xs.append((time.perf_counter()-t)*1000)\n"
                        "print('exec', statistics.median(xs))"
                    )
                    out = subprocess.run([a.pow, "-c", code], capture_output=True, text=True, check=True).stdout
                    vals = dict(line.split() for line in out.splitlines())
                    rows.append(("python-on-whales import", f"{float(vals['import']):8.1f}", "", "once"))
                    rows.append(("python-on-whales execute()", f"{float(vals['exec']):8.1f}", "", "median"))
                    bench("python -c 'import python_on_whales'",
                          lambda: run(a.pow, "-c", "import python_on_whales"))
                    bench("python -c pass (same venv)", lambda: run(a.pow, "-c", "pass"))
    finally:
        for engine, ctr in started:
            subprocess.run([engine, "rm", "-f", ctr], capture_output=True)

    print(f"{'path':42} {'median ms':>9} {'min':>8} {'max':>8}")
    for r in rows:
        print(f"{r[0]:42} {r[1]:>9} {r[2]:>8} {r[3]:>8}")


if __name__ == "__main__":
    sys.exit(main())
