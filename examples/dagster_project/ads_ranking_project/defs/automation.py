"""The daily job, its schedule, the run-cluster sensors and the raystep resource.

They are the Python project's own objects (../../definitions.py, loaded by path), so the two
projects cannot drift apart; only the assets and the check come from defs.yaml here.
"""

import importlib.util
from pathlib import Path

import dagster as dg

_PYTHON_PROJECT = Path(__file__).resolve().parents[2] / "definitions.py"
_spec = importlib.util.spec_from_file_location(
    "ads_ranking_python_project", _PYTHON_PROJECT
)
assert _spec is not None and _spec.loader is not None
_python = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_python)

defs = dg.Definitions(
    jobs=_python.defs.jobs,
    schedules=_python.defs.schedules,
    sensors=_python.defs.sensors,
    resources=_python.defs.resources,
)
