"""Run-status sensors that remove a Dagster run's run-scoped clusters when the run ends.

With `spec.cluster.reuse: run` (or `RaystepResource(cluster_reuse="run")`) the steps of one run
share a cluster that no step deletes. `raystep_run_cluster_sensors` returns one sensor per final
run status (success, failure, cancellation); each runs `raystep down --dagster-run-id RUN_ID` with
the resource's binary, backend, namespace and profile. Should they never fire (the daemon down,
the run worker killed), `raystep gc` removes the cluster once its expiry, the run's timeout, passed.
"""

from collections.abc import Sequence
from typing import Any

import dagster as dg

from dagster_raystep.resource import RaystepResource

FINAL_STATUSES: dict[str, dg.DagsterRunStatus] = {
    "success": dg.DagsterRunStatus.SUCCESS,
    "failure": dg.DagsterRunStatus.FAILURE,
    "canceled": dg.DagsterRunStatus.CANCELED,
}


def raystep_run_cluster_sensors(
    raystep: RaystepResource,
    *,
    name_prefix: str = "raystep_run_cluster",
    monitored_jobs: Sequence[Any] | None = None,
    minimum_interval_seconds: int = 30,
) -> list[dg.SensorDefinition]:
    """Return the sensors that delete each ended run's run-scoped clusters through raystep."""
    return [
        _down_sensor(
            raystep,
            f"{name_prefix}_{label}",
            status,
            monitored_jobs,
            minimum_interval_seconds,
        )
        for label, status in FINAL_STATUSES.items()
    ]


def _down_sensor(
    raystep: RaystepResource,
    name: str,
    status: dg.DagsterRunStatus,
    monitored_jobs: Sequence[Any] | None,
    minimum_interval_seconds: int,
) -> dg.SensorDefinition:
    @dg.run_status_sensor(
        name=name,
        run_status=status,
        monitored_jobs=monitored_jobs,
        minimum_interval_seconds=minimum_interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"Deletes the run-scoped raystep clusters of runs that ended with {status.value}.",
    )
    def down(context: dg.RunStatusSensorContext) -> dg.SkipReason:
        run_id = context.dagster_run.run_id
        report = raystep.down_run(run_id).strip()
        context.log.info(f"raystep down --dagster-run-id {run_id}: {report}")
        return dg.SkipReason(report)

    return down
