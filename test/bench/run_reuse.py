"""Measure what one cluster per Dagster run saves on the example's daily job.

    make build && .venv/bin/python test/bench/run_reuse.py [--backend local|kuberay|both] [-n RUNS]

For each backend, materializes the daily job of examples/dagster_project (model, AUC check,
predictions) with Dagster, alternating two modes: `step`, where every step brings up a cluster of
its own, and `run`, the example's resource (run_cluster=examples/ads_ranking/run_cluster.yaml),
where the steps share the run's cluster. It prints, per run, the clusters created and the run's
wall time, then the mean of each mode. After a `run` run it removes the run's cluster as the
run-status sensor does (`raystep down --dagster-run-id`), outside the timed run.

- local: clusters are the Ray heads that came up: with reuse `step` the `ray start --head` runs
  (through a wrapper that counts them) less those the steps reported as failed and started
  again; with reuse `run` the run-scoped heads recorded in the state dir when the run ends. The
  steps' outputs go to a temporary directory.
- kuberay: a sandbox (test/cluster/sandbox with its API server's audit log) is started for the
  measurement and stopped after it; clusters are the RayClusters whose creation the audit log
  records (the operator's, one per step's RayJob, or raystep's run-scoped one). Pods start at
  once (-fast), so the figures show raystep's and KubeRay's own work, not a real node pool's
  minutes of provisioning, which reuse saves on top.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import NoReturn

REPO = Path(__file__).resolve().parents[2]
# This checkout's dagster_raystep and test helpers, not an installed copy.
sys.path[:0] = [
    str(REPO / "dagster_integration"),
    str(REPO / "dagster_integration" / "tests"),
]

import dagster as dg
from dagster_raystep import RaystepResource
from kuberay_sandbox import created, running_sandbox
from test_ads_ranking import example_overrides, materialize_daily

MODES = ("step", "run")
# Generous bounds: a busy machine starts Ray heads slowly, and a measurement should not fail for it.
TIMEOUTS = {"spec.timeouts.provision": "10m", "spec.timeouts.run": "30m"}


def _example() -> ModuleType:
    path = REPO / "examples" / "dagster_project" / "definitions.py"
    spec = importlib.util.spec_from_file_location("ads_ranking_definitions", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fail(message: str) -> NoReturn:
    raise SystemExit(message)


def _resource(example: ModuleType, mode: str, **kwargs: object) -> RaystepResource:
    run_cluster = str(example.RUN_CLUSTER) if mode == "run" else None
    return RaystepResource(
        binary=str(REPO / "bin" / "raystep"), run_cluster=run_cluster, **kwargs
    )


# FAILED_HEAD starts raystep's warning about a Ray head that did not come up and is started again.
FAILED_HEAD = "ray head did not start"


def _run(
    example: ModuleType,
    raystep: RaystepResource,
    before_down: Callable[[], None] = lambda: None,
) -> tuple[float, int]:
    """Materialize the daily job; return its wall time and how many private heads failed to start.

    raystep starts a head again when one fails to come up (a busy machine); those attempts are
    not clusters. The run's cluster is removed after the timed run, after before_down.
    """
    instance = dg.DagsterInstance.ephemeral()
    started = time.monotonic()
    result = materialize_daily(example, instance, raystep, raise_on_error=False)
    wall = time.monotonic() - started
    before_down()
    raystep.down_run(result.run_id)
    if not result.success:
        _fail(f"the daily job failed (run {result.run_id}) with {raystep!r}")
    failed = sum(
        FAILED_HEAD in entry.user_message for entry in instance.all_logs(result.run_id)
    )
    return wall, failed


def _ray_counter(work: Path) -> tuple[Path, Path]:
    """A `ray` that records each `ray start --head` in a log, then runs the real one."""
    real = REPO / ".venv" / "bin" / "ray"
    log = work / "heads.log"
    log.touch()
    wrapper = work / "ray"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" start --head "*) echo "$$" >> "{log}";; esac\n'
        f'exec "{real}" "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper, log


def _count_records(state: Path, into: list[int]) -> None:
    """Append the number of clusters recorded in the local state dir state to into."""
    into.append(len(list(state.glob("*.json"))))


def measure_local(
    example: ModuleType, work: Path, runs: int
) -> list[tuple[str, str, int, float]]:
    """Rows (backend, mode, clusters, wall seconds) of the local backend."""
    os.environ.pop("RAY_ADDRESS", None)
    wrapper, heads = _ray_counter(work)
    path = os.pathsep.join([str(REPO / ".venv" / "bin"), os.environ.get("PATH", "")])
    rows = []
    for i in range(runs):
        for mode in MODES:
            out = work / f"local-{mode}-{i}"
            raystep = _resource(
                example,
                mode,
                backend="local",
                overrides={**example_overrides(out), **TIMEOUTS},
                env={
                    "PATH": path,
                    "XDG_STATE_HOME": str(out / "state"),
                    "RAYSTEP_RAY_BIN": str(wrapper),
                },
            )
            before = len(heads.read_text().splitlines())
            recorded: list[int] = []
            state = out / "state" / "raystep" / "clusters"
            wall, failed = _run(
                example,
                raystep,
                functools.partial(_count_records, state, recorded),
            )
            started = len(heads.read_text().splitlines()) - before
            # A run-scoped head that came up is recorded until down; its restarts go to
            # raystep's log, not the run's events.
            clusters = recorded[0] if mode == "run" else started - failed
            rows.append(("local", mode, clusters, wall))
            _print_row(rows[-1])
    return rows


def measure_kuberay(
    example: ModuleType, work: Path, runs: int
) -> list[tuple[str, str, int, float]]:
    """Rows (backend, mode, clusters, wall seconds) of the KubeRay backend, in a sandbox."""
    os.environ.pop("RAY_ADDRESS", None)
    print("kuberay: starting the sandbox", file=sys.stderr)
    rows = []
    with running_sandbox(REPO, work, _fail) as sandbox:
        for i in range(runs):
            for mode in MODES:
                raystep = _resource(
                    example,
                    mode,
                    backend="kuberay",
                    overrides={
                        **example_overrides(work / f"kuberay-{mode}-{i}"),
                        **TIMEOUTS,
                    },
                    env=sandbox.env,
                )
                since = sandbox.audit_log.stat().st_size
                wall, _ = _run(example, raystep)
                clusters = len(created(sandbox.audit_log, "rayclusters", since))
                rows.append(("kuberay", mode, clusters, wall))
                _print_row(rows[-1])
    return rows


def _print_row(row: tuple[str, str, int, float]) -> None:
    backend, mode, clusters, wall = row
    print(
        f"  {backend:8} reuse={mode:4} clusters={clusters} wall={wall:.1f}s",
        file=sys.stderr,
    )


def _table(rows: list[tuple[str, str, int, float]]) -> str:
    lines = [
        "| backend | reuse | runs | clusters per run | wall time per run (mean, min-max) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for backend in dict.fromkeys(r[0] for r in rows):
        for mode in MODES:
            mine = [r for r in rows if r[0] == backend and r[1] == mode]
            clusters = sorted({r[2] for r in mine})
            walls = [r[3] for r in mine]
            lines.append(
                f"| {backend} | {mode} | {len(mine)} | {', '.join(map(str, clusters))} | "
                f"{statistics.mean(walls):.1f} s ({min(walls):.1f}-{max(walls):.1f}) |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--backend", choices=("local", "kuberay", "both"), default="both"
    )
    parser.add_argument(
        "-n", "--runs", type=int, default=1, help="runs per backend and mode"
    )
    args = parser.parse_args()
    if not os.access(REPO / "bin" / "raystep", os.X_OK):
        _fail("bin/raystep is missing: run `make build`")
    example = _example()
    measures: list[
        Callable[[ModuleType, Path, int], list[tuple[str, str, int, float]]]
    ] = []
    if args.backend in ("local", "both"):
        measures.append(measure_local)
    if args.backend in ("kuberay", "both"):
        measures.append(measure_kuberay)
    work = Path(tempfile.mkdtemp(prefix="raystep-run-reuse-"))
    try:
        rows = []
        for measure in measures:
            (work / measure.__name__).mkdir()
            rows += measure(example, work / measure.__name__, args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(_table(rows))


if __name__ == "__main__":
    main()
