"""What a trivial raystep step costs the Dagster process, part by part.

    .venv/bin/python test/bench/dagster_parts.py [-n 21]

No Ray and no raystep: `RaystepResource` runs a stand-in that only writes the Pipes messages a
trivial step on an existing head sends (Pipes' `opened`, raystep's six phase lines, the
materialization, `closed`), so what is measured is Dagster's side alone. Each case materializes
one asset in this process, right after an unmeasured run of itself (its warm-up); the cases alternate, -n rounds. The table gives the
median CPU time of this process (RUSAGE_SELF: the stand-in's own CPU is not in it) and what the case
adds to the row it is read against (the median of their differences round by round). The last two rows wait as long as a trivial job takes on a
2-core machine: an asset that only sleeps, and the step with a stand-in that sleeps after writing.
"""

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_raystep import RaystepResource

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "test" / "bench" / "trivial.yaml"
JOB_SECONDS = 1.3
"""JOB_SECONDS is how long a trivial job takes on the bench's machine (Ray's start_time to end_time)."""

STAND_IN = """\
import base64, json, os, sys, time, zlib

path = json.loads(zlib.decompress(base64.b64decode(os.environ["DAGSTER_PIPES_MESSAGES"])))["path"]
with open(os.environ["STAND_IN_MESSAGES"], encoding="utf-8") as src, open(path, "a", encoding="utf-8") as dst:
    dst.write(src.read())
time.sleep(float(os.environ["STAND_IN_SLEEP"]))
"""


def message(method: str, params: dict[str, Any]) -> str:
    return json.dumps(
        {"__dagster_pipes_version": "0.1", "method": method, "params": params}
    )


def step_messages(phase_lines: bool) -> str:
    """The Pipes messages of a trivial step on an existing head, as raystep writes them."""
    step = "raystep-bench-trivial-0123456789ab"
    head = "http://127.0.0.1:8265"
    lines = [
        f"raystep provision: step {step} (eval) on local",
        f"raystep provision: cluster {head} ready",
        f"raystep dashboard: reached {head}",
        f"raystep submit: job {step} submitted",
        f"raystep run: job {step} SUCCEEDED",
        f"raystep teardown: cluster {head} left running (not owned by this step)",
    ]
    metadata: dict[str, Any] = {
        f"raystep/{k}": {"raw_value": v, "type": t}
        for k, v, t in [
            ("attached", False, "bool"),
            ("backend", "local", "text"),
            ("cluster", head, "text"),
            ("cluster_shape", "existing ray cluster", "text"),
            ("dashboard_url", head, "url"),
            ("duration_run_s", JOB_SECONDS, "float"),
            ("duration_total_s", JOB_SECONDS, "float"),
            ("gpu_count", 0, "int"),
            ("gpu_hours", 0.0, "float"),
            ("kind", "eval", "text"),
            ("spec", "bench-trivial", "text"),
            ("status", "SUCCEEDED", "text"),
            ("submission_id", step, "text"),
        ]
    }
    out = [message("opened", {"extras": {}})]
    if phase_lines:
        out += [message("log", {"level": "INFO", "message": m}) for m in lines]
    out += [
        message(
            "report_asset_materialization",
            {"asset_key": "bench", "data_version": None, "metadata": metadata},
        ),
        message("closed", {}),
    ]
    return "".join(m + "\n" for m in out)


class Empty(dg.ConfigurableResource):  # type: ignore[type-arg]  # Dagster's own spelling
    """A configurable resource without fields."""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-n", type=int, default=21, help="rounds of all cases")
    a = p.parse_args()

    @dg.asset(name="bench")
    def nothing(context: dg.AssetExecutionContext) -> dg.MaterializeResult[Any]:
        return dg.MaterializeResult()

    @dg.asset(name="bench")
    def sleeps(context: dg.AssetExecutionContext) -> dg.MaterializeResult[Any]:
        time.sleep(JOB_SECONDS)
        return dg.MaterializeResult()

    @dg.asset(name="bench")
    def holds_empty(
        context: dg.AssetExecutionContext, r: Empty
    ) -> dg.MaterializeResult[Any]:
        return dg.MaterializeResult()

    @dg.asset(name="bench")
    def holds_raystep(
        context: dg.AssetExecutionContext, raystep: RaystepResource
    ) -> dg.MaterializeResult[Any]:
        return dg.MaterializeResult()

    @dg.asset(name="bench")
    def runs_raystep(
        context: dg.AssetExecutionContext, raystep: RaystepResource
    ) -> dg.MaterializeResult[Any]:
        return raystep.run(context, SPEC).get_materialize_result()

    with tempfile.TemporaryDirectory(prefix="raystep-bench-") as tmp:
        binary = Path(tmp) / "raystep"
        binary.write_text(f"#!{sys.executable}\n{STAND_IN}")
        binary.chmod(0o755)
        files = {}
        for phase_lines in (False, True):
            files[phase_lines] = Path(tmp) / f"messages-{phase_lines}.jsonl"
            files[phase_lines].write_text(step_messages(phase_lines))

        def raystep(
            phase_lines: bool, sleep: float = 0.0
        ) -> Callable[[], dict[str, Any]]:
            env = {
                "STAND_IN_MESSAGES": str(files[phase_lines]),
                "STAND_IN_SLEEP": str(sleep),
            }
            return lambda: {"raystep": RaystepResource(binary=str(binary), env=env)}

        # (what, asset, its resources, the row it is read against)
        cases: list[
            tuple[str, dg.AssetsDefinition, Callable[[], dict[str, Any]], int | None]
        ] = [
            ("an asset that does nothing (Dagster alone)", nothing, dict, None),
            (
                "an asset that holds an empty ConfigurableResource",
                holds_empty,
                lambda: {"r": Empty()},
                0,
            ),
            (
                "an asset that holds RaystepResource, not run",
                holds_raystep,
                raystep(False),
                1,
            ),
            (
                "raystep run: Pipes session, process, opened, materialization, closed",
                runs_raystep,
                raystep(False),
                2,
            ),
            ("the same with raystep's six phase lines", runs_raystep, raystep(True), 3),
            (f"an asset that sleeps {JOB_SECONDS:g} s", sleeps, dict, 0),
            (
                f"the step above, its stand-in sleeping {JOB_SECONDS:g} s",
                runs_raystep,
                raystep(True, JOB_SECONDS),
                4,
            ),
        ]
        instance = dg.DagsterInstance.ephemeral()
        cpu: dict[str, list[float]] = {name: [] for name, _, _, _ in cases}
        for _ in range(a.n):
            for name, asset, resources, _ in cases:
                # Once unmeasured first: what ran before (a case that waited,
                # whose caches went cold meanwhile) must not count here.
                dg.materialize([asset], resources=resources(), instance=instance)
                res = resources()
                before = resource.getrusage(resource.RUSAGE_SELF)
                dg.materialize([asset], resources=res, instance=instance)
                after = resource.getrusage(resource.RUSAGE_SELF)
                cpu[name].append(
                    after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                )

    print(f"{a.n} rounds, medians of the Dagster process's own CPU\n")
    print("| case | CPU | over row | adds |")
    print("| --- | ---: | ---: | ---: |")
    medians = [statistics.median(cpu[name]) for name, _, _, _ in cases]
    for i, (name, _, _, base) in enumerate(cases):
        over = "" if base is None else str(base)
        # The median of the differences within each round, not the
        # difference of medians: the machine's pace drifts between rounds.
        adds = (
            ""
            if base is None
            else ms(
                statistics.median(
                    x - y for x, y in zip(cpu[name], cpu[cases[base][0]], strict=True)
                )
            )
        )
        print(f"| {i}: {name} | {ms(medians[i])} | {over} | {adds} |")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


if __name__ == "__main__":
    main()
