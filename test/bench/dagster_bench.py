"""Side by side under Dagster: RaystepResource against dagster-ray's PipesRayJobClient.

    .venv/bin/python test/bench/dagster_bench.py --address http://127.0.0.1:8265 [-n 5] [--lines 200000]

(`go run ./test/bench -dagster` starts a head and runs this for you.)

Each tool runs one asset that submits the same job to the same running Ray head: a trivial
one (print('ok')) and one printing numbered lines (test/bench/lines.py). dagster-ray is
installed into a virtualenv of its own (out/bench/dagster-ray, made on first use from the
package registry, with the Dagster and Ray versions of raystep's .venv): it is never a
dependency of raystep. Every materialization runs in a fresh Python process per tool,
alternating tools; the process first materializes once to warm up (imports, the instance),
then measures one materialization: its wall time, the CPU time of the whole process tree
meanwhile (the Dagster process, and every child it waited for: raystep, Ray's CLI), the
peak RSS of its largest child, the job's own time as Ray reports it, and the log lines
lost or repeated on the process's stdout. A last line gives Dagster's own CPU for a
materialization, measured the same way on an asset that does nothing: what each tool adds is its
row's CPU minus that.
"""

import argparse
import json
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DAGSTER_RAY = "dagster-ray[pipes]==0.4.8"
MEASURED = "--- the measured materialization starts here ---"
MEASURED_END = "--- the measured materialization ended ---"
ALONE = "Dagster alone"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--address", required=True, help="dashboard URL of a running Ray head"
    )
    p.add_argument("-n", type=int, default=5, help="measured runs per tool and job")
    p.add_argument(
        "--lines", type=int, default=200_000, help="lines the log job prints"
    )
    p.add_argument(
        "--raystep", default=str(ROOT / "bin" / "raystep"), help="raystep binary"
    )
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--job", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        child(a)
        return
    tools = {
        "RaystepResource": sys.executable,
        "dagster-ray": str(dagster_ray_python()),
    }
    jobs = {"trivial": 0, f"{a.lines}-line log": a.lines}
    rows = []
    for job, lines in jobs.items():
        samples: dict[str, list[dict[str, float]]] = {t: [] for t in tools}
        for _ in range(a.n):
            for tool, python in tools.items():
                samples[tool].append(run_child(python, tool, job, lines, a))
        for tool in tools:
            rows.append((job, tool, samples[tool]))
    # What Dagster itself costs, to read the rows against: the same
    # measurement of an asset that does nothing, in the same kind of process.
    alone = [run_child(sys.executable, ALONE, "trivial", 0, a) for _ in range(a.n)]
    print(
        f"head {a.address}, {a.n} runs of each tool and job, each in a fresh warmed-up process; medians\n"
    )
    print(
        "| job | tool | wall | Ray's job time | wall beyond it | CPU, whole tree | of it, children | raystep's peak RSS "
        "| lines lost | repeated |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for job, tool, ss in rows:
        beyond = sorted(s["wall"] - s["job"] for s in ss)
        print(
            f"| {job} | {tool} | {ms(median(ss, 'wall'))} | {ms(median(ss, 'job'))} | {ms(statistics.median(beyond))} "
            f"({ms(beyond[0])}–{ms(beyond[-1])}) | {ms(median(ss, 'cpu'))} | {ms(median(ss, 'children'))} "
            f"| {rss(ss)} | {max(int(s['lost']) for s in ss)} | {max(int(s['repeated']) for s in ss)} |"
        )
    print(
        f"\n{ALONE}, an asset that does nothing: CPU {ms(median(alone, 'cpu'))}; what a tool adds to a "
        "trivial step is its row's CPU minus this."
    )


def median(ss: list[dict[str, float]], key: str) -> float:
    return statistics.median(s[key] for s in ss)


def rss(ss: list[dict[str, float]]) -> str:
    peaks = [s["raystep_rss"] for s in ss if s.get("raystep_rss")]
    return f"{max(peaks) / 2**20:.1f} MiB" if peaks else "no binary"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms"


def dagster_ray_python() -> Path:
    """The python of dagster-ray's own virtualenv, made on first use."""
    venv = ROOT / "out" / "bench" / "dagster-ray"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pins = [
            f"dagster=={metadata.version('dagster')}",
            f"ray[default]=={metadata.version('ray')}",
        ]
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", DAGSTER_RAY, *pins], check=True
        )
    return python


def run_child(
    python: str, tool: str, job: str, lines: int, a: argparse.Namespace
) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        stdout = Path(tmp) / "stdout"
        stderr = Path(tmp) / "stderr"
        with stdout.open("wb") as f, stderr.open("wb") as e:
            done = subprocess.run(
                [
                    python,
                    __file__,
                    "--child",
                    tool,
                    "--job",
                    str(lines),
                    "--address",
                    a.address,
                    "--raystep",
                    a.raystep,
                    "--out",
                    str(out),
                ],
                stdout=f,
                stderr=e,
                check=False,
                cwd=ROOT,
            )
        if done.returncode != 0:
            raise RuntimeError(
                f"{tool}, {lines} lines: exit {done.returncode}:\n{stderr.read_text()[-4000:]}"
            )
        r: dict[str, float] = json.loads(out.read_text())
        submission = r.pop("id")
        r["job"] = job_time(a.address, str(submission)) if submission else 0.0
        measured = (
            stdout.read_bytes()
            .split(MEASURED.encode(), 1)[-1]
            .split(MEASURED_END.encode(), 1)[0]
        )
        r["lost"], r["repeated"] = count_lines(measured, lines) if lines else (0, 0)
        return r


def job_time(address: str, submission_id: str) -> float:
    with urllib.request.urlopen(f"{address}/api/jobs/{submission_id}") as resp:
        info = json.load(resp)
    if info["status"] != "SUCCEEDED":
        raise RuntimeError(f"job {submission_id}: {info['status']}")
    return (info["end_time"] - info["start_time"]) / 1000


def count_lines(out: bytes, want: int) -> tuple[int, int]:
    seen = [0] * (want + 1)
    for line in out.splitlines():
        if not line.startswith(b"line "):
            continue
        rest = line[5:].strip()
        if rest == b"end":
            seen[want] += 1
        elif rest.isdigit() and int(rest) < want:
            seen[int(rest)] += 1
    return sum(1 for c in seen if c == 0), sum(c - 1 for c in seen if c > 1)


def child(a: argparse.Namespace) -> None:
    """One tool's process: materialize once to warm up, then once measured."""
    import dagster as dg

    lines = int(a.job)
    bench_dir = ROOT / "test" / "bench"
    if a.child == "RaystepResource":
        from dagster_raystep import RaystepResource

        overrides = (
            {"spec.entrypoint": f"python lines.py {lines}", "spec.workingDir": "."}
            if lines
            else {}
        )

        @dg.asset
        def bench(
            context: dg.AssetExecutionContext, raystep: RaystepResource
        ) -> dg.MaterializeResult:
            return raystep.run(
                context, bench_dir / "trivial.yaml", overrides=overrides
            ).get_materialize_result()

        def resources(binary: str = a.raystep) -> dict[str, object]:
            return {"raystep": RaystepResource(binary=binary, ray_address=a.address)}

        key = "raystep/submission_id"
    elif a.child == ALONE:

        @dg.asset
        def bench(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
            return dg.MaterializeResult(metadata={"id": ""})

        def resources(binary: str = "") -> dict[str, object]:
            return {}

        key = "id"
    else:
        from dagster_ray.core.pipes import PipesRayJobClient

        params: dict[str, object] = {
            "entrypoint": "python -c \"print('ok')\"",
            "entrypoint_num_cpus": 0.1,
        }
        if lines:
            params = {
                "entrypoint": f"python lines.py {lines}",
                "entrypoint_num_cpus": 0.1,
                "runtime_env": {"working_dir": str(bench_dir)},
            }

        @dg.asset
        def bench(
            context: dg.AssetExecutionContext, ray: PipesRayJobClient
        ) -> dg.MaterializeResult:
            return ray.run(
                context=context, submit_job_params=dict(params)
            ).get_materialize_result()  # type: ignore[arg-type]

        def resources(binary: str = "") -> dict[str, object]:
            # A new client each run: its message reader keeps state from the last one.
            return {"ray": PipesRayJobClient(address=a.address)}

        key = "Ray Job ID"
    instance = dg.DagsterInstance.ephemeral()
    dg.materialize([bench], resources=resources(), instance=instance)  # warm-up
    print(MEASURED, flush=True)
    res = resources()
    self0, kids0 = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    start = time.perf_counter()
    result = dg.materialize([bench], resources=res, instance=instance)
    wall = time.perf_counter() - start
    self1, kids1 = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    cpu = (self1.ru_utime + self1.ru_stime - self0.ru_utime - self0.ru_stime) + (
        kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime
    )
    print(MEASURED_END, flush=True)
    kids = kids1.ru_utime + kids1.ru_stime - kids0.ru_utime - kids0.ru_stime
    md = result.asset_materializations_for_node("bench")[0].metadata
    out = {"wall": wall, "cpu": cpu, "children": kids, "id": md[key].value}
    if a.child == "RaystepResource" and Path("/usr/bin/time").exists():
        # One more run, not measured for time, through time(1): a child's rusage
        # counts the Dagster process's memory it was forked with.
        with tempfile.TemporaryDirectory() as tmp:
            peak, wrapper = Path(tmp) / "peak", Path(tmp) / "raystep"
            wrapper.write_text(
                f'#!/bin/sh\nexec /usr/bin/time -o {peak} -f %M {shlex.quote(a.raystep)} "$@"\n'
            )
            wrapper.chmod(0o755)
            dg.materialize(
                [bench], resources=resources(str(wrapper)), instance=instance
            )
            out["raystep_rss"] = int(peak.read_text().split()[-1]) * 1024
    Path(a.out).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
