"""dagster-raystep: run Ray training, evaluation and batch-inference steps from Dagster.

`RaystepResource` runs the raystep binary (`raystep run -f SPEC --set path=value ...`) through
Dagster Pipes; `raystep_asset` and `raystep_asset_check` turn a job spec into an asset or an
asset check. raystep provisions the Ray cluster, relays the Ray driver's logs, metrics and checks
to Dagster, and tears the cluster down.
"""

from dagster_raystep.assets import (
    DEFAULT_RESOURCE_KEY,
    SUMMARY_KEY,
    RaystepRunConfig,
    raystep_asset,
    raystep_asset_check,
)
from dagster_raystep.component import RaystepAssetComponent
from dagster_raystep.resource import (
    EXIT_CODES,
    EXIT_PREEMPTED,
    RAYSTEP_BIN_ENV,
    OverrideValue,
    RaystepError,
    RaystepResource,
    format_overrides,
)
from dagster_raystep.sensors import raystep_run_cluster_sensors

__all__ = [
    "DEFAULT_RESOURCE_KEY",
    "EXIT_CODES",
    "EXIT_PREEMPTED",
    "RAYSTEP_BIN_ENV",
    "SUMMARY_KEY",
    "OverrideValue",
    "RaystepAssetComponent",
    "RaystepError",
    "RaystepResource",
    "RaystepRunConfig",
    "format_overrides",
    "raystep_asset",
    "raystep_asset_check",
    "raystep_run_cluster_sensors",
]
