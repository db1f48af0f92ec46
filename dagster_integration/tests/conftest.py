"""Fixtures for the dagster-raystep tests: the repository, the raystep binary, a Ray-ready environment."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from rayheads import Head, private_head, session_head

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"
EXAMPLE_DEFINITIONS = REPO / "examples" / "dagster_project" / "definitions.py"


@pytest.fixture(scope="session", autouse=True)
def state_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A state dir of the session's own: the history of the steps the tests run stays out of $HOME."""
    state = tmp_path_factory.mktemp("state")
    before = os.environ.get("XDG_STATE_HOME")
    os.environ["XDG_STATE_HOME"] = str(state)
    yield state
    if before is None:
        del os.environ["XDG_STATE_HOME"]
    else:
        os.environ["XDG_STATE_HOME"] = before


@pytest.fixture(scope="session")
def raystep_bin() -> Path:
    """bin/raystep, built by `make build`; its absence is a failure, not a skip."""
    binary = Path(os.environ.get("RAYSTEP_BIN") or REPO / "bin" / "raystep")
    if not os.access(binary, os.X_OK):
        pytest.fail(f"{binary} is missing: run `make build`")
    return binary


@pytest.fixture(scope="session")
def ray_path() -> str:
    """PATH with the virtualenv first, so raystep finds `ray` and the driver's `python` has Ray.

    Under `make test` the suite's counting ray (RAYSTEP_RAY_BIN) goes before it.
    """
    interpreter_bin = str(Path(sys.executable).parent)
    first = (
        [str(Path(os.environ["RAYSTEP_RAY_BIN"]).parent)]
        if os.environ.get("RAYSTEP_RAY_BIN")
        else []
    )
    return os.pathsep.join(
        [*first, str(VENV_BIN), interpreter_bin, os.environ.get("PATH", "")]
    )


@pytest.fixture(scope="session")
def ray_head(ray_path: str) -> Iterator[Head]:
    """The Ray head tests share: the session's under `make test`, else one started once here.

    Tests that run steps on it give each its own Dagster run, so no two attach to one job.
    """
    head = session_head()
    if head is not None:
        yield head
        return
    with private_head(ray_path) as head:
        yield head


@pytest.fixture
def raystep_env(ray_path: str, ray_head: Head) -> dict[str, str]:
    """The environment that has raystep run steps on the shared head (RAY_ADDRESS)."""
    return {"PATH": ray_path, "RAY_ADDRESS": ray_head.dashboard}


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
