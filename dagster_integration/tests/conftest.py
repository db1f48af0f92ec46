"""Fixtures for the dagster-raystep tests: the repository, the raystep binary, a Ray-ready environment."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
EXAMPLE_DEFINITIONS = REPO / "examples" / "dagster_project" / "definitions.py"


@pytest.fixture(scope="session")
def raystep_bin() -> Path:
    """bin/raystep, built by `make build`; its absence is a failure, not a skip."""
    binary = Path(os.environ.get("RAYSTEP_BIN") or REPO / "bin" / "raystep")
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{binary} is missing: run `make build`")
    return binary


@pytest.fixture(scope="session")
def ray_path() -> str:
    """PATH with the virtualenv first, so raystep finds `ray` and the driver's `python` has Ray."""
    interpreter_bin = str(Path(sys.executable).parent)
    return os.pathsep.join([str(VENV_BIN), interpreter_bin, os.environ.get("PATH", "")])


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def example_definitions() -> Path:
    """examples/dagster_project/definitions.py."""
    return EXAMPLE_DEFINITIONS


@pytest.fixture
def example() -> ModuleType:
    """The example project's definitions module, freshly imported."""
    spec = importlib.util.spec_from_file_location(
        "ads_ranking_definitions", EXAMPLE_DEFINITIONS
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
