"""RaystepAssetComponent: the example as a `dg` project, the same definitions as the Python one.

`dg` is the real dagster-dg-cli of the virtualenv: `dg check defs` and `dg list components` on
the example, `dg scaffold defs` into a new project, whose scaffolded asset then runs through
raystep on a private local head.
"""

from __future__ import annotations

import http.client
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import dagster as dg
import pytest
from dagster_raystep import RaystepResource

DG = Path(sys.executable).parent / "dg"

NEW_PROJECT = """\
[project]
name = "new-project"
version = "0.1.0"
dependencies = ["dagster-raystep"]

[tool.dg]
directory_type = "project"

[tool.dg.project]
root_module = "new_project"
"""

NEW_DEFINITIONS = """\
from pathlib import Path

import dagster as dg

defs = dg.load_from_defs_folder(path_within_project=Path(__file__).parent)
"""


def _dg(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run this virtualenv's dg in cwd, the virtualenv active as `source .venv/bin/activate` does."""
    env = {**os.environ, "VIRTUAL_ENV": sys.prefix, "NO_COLOR": "1"}
    env["PATH"] = os.pathsep.join([str(DG.parent), env.get("PATH", "")])
    return subprocess.run(
        [str(DG), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@contextmanager
def _import_project(root: Path, module: str) -> Iterator[ModuleType]:
    """Import module's definitions from the dg project at root; forget it afterwards."""
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module(f"{module}.definitions")
    finally:
        sys.path.remove(str(root))
        for name in [
            n for n in sys.modules if n == module or n.startswith(module + ".")
        ]:
            del sys.modules[name]


@pytest.fixture
def dg_project(example_definitions: Path) -> Iterator[dg.Definitions]:
    """The example's dg project, loaded from its defs folder."""
    with _import_project(example_definitions.parent, "ads_ranking_project") as module:
        yield module.defs


# LOAD_METADATA is what dg adds to every definition it loads from a defs folder: where it came
# from. It is not part of the definition.
LOAD_METADATA = {"dagster/code_references", "dagster/component_origin"}


def _assets(defs: dg.Definitions) -> dict[dg.AssetKey, dg.AssetSpec]:
    return {
        spec.key: spec.replace_attributes(
            metadata={k: v for k, v in spec.metadata.items() if k not in LOAD_METADATA}
        )
        for spec in defs.resolve_all_asset_specs()
    }


def _checks(defs: dg.Definitions) -> dict[dg.AssetCheckKey, dg.AssetCheckSpec]:
    graph = defs.resolve_asset_graph()
    specs = (graph.get_check_spec(key) for key in graph.asset_check_keys)
    return {
        spec.key: spec.with_metadata(
            {k: v for k, v in spec.metadata.items() if k not in LOAD_METADATA}
        )
        for spec in specs
    }


def test_component_and_factories_make_the_same_definitions(
    dg_project: dg.Definitions, example: ModuleType
) -> None:
    python: dg.Definitions = example.defs
    components, factories = _assets(dg_project), _assets(python)
    assert sorted(components) == sorted(factories)
    for key, spec in factories.items():
        assert components[key] == spec, key.to_user_string()
    assert _checks(dg_project) == _checks(python)
    graph = dg_project.resolve_asset_graph()
    (check_key,) = graph.asset_check_keys
    assert graph.get_check_spec(check_key).blocking

    assert {j.name for j in dg_project.resolve_all_job_defs()} == {
        j.name for j in python.resolve_all_job_defs()
    }
    schedule = dg_project.resolve_schedule_def("ads_ranking_daily_retrain")
    assert schedule.cron_schedule == "0 3 * * *"
    assert sorted(s.name for s in dg_project.sensors or []) == sorted(
        s.name for s in python.sensors or []
    )
    assert set(dg_project.resources or {}) == {"raystep"}


def test_dg_check_defs_and_list_components_on_the_example(
    example_definitions: Path,
) -> None:
    project = example_definitions.parent
    check = _dg(project, "check", "defs")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "All definitions loaded successfully" in check.stdout + check.stderr

    listed = _dg(project, "list", "components", "--json")
    assert listed.returncode == 0, listed.stdout + listed.stderr
    types = {c["key"] for c in json.loads(listed.stdout)["items"]}
    assert "dagster_raystep.RaystepAssetComponent" in types


@pytest.fixture
def new_project(tmp_path: Path) -> Path:
    """An empty dg project in tmp_path, outside the checkout."""
    root = tmp_path / "new-project"
    package = root / "new_project"
    (package / "defs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(NEW_PROJECT)
    (package / "__init__.py").write_text("")
    (package / "definitions.py").write_text(NEW_DEFINITIONS)
    return root


def test_scaffolded_component_loads_and_materializes(
    new_project: Path, raystep_bin: Path, raystep_env: dict[str, str], tmp_path: Path
) -> None:
    scaffold = _dg(
        new_project,
        "scaffold",
        "defs",
        "dagster_raystep.RaystepAssetComponent",
        "squares",
    )
    assert scaffold.returncode == 0, scaffold.stdout + scaffold.stderr
    folder = new_project / "new_project" / "defs" / "squares"
    assert sorted(p.name for p in folder.iterdir()) == [
        "defs.yaml",
        "main.py",
        "step.yaml",
    ]
    check = _dg(new_project, "check", "defs")
    assert check.returncode == 0, check.stdout + check.stderr

    validate = subprocess.run(
        [str(raystep_bin), "validate", "-f", str(folder / "step.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert validate.returncode == 0, validate.stderr

    with _import_project(new_project, "new_project") as module:
        (spec,) = module.defs.resolve_all_asset_specs()
        assert spec.key == dg.AssetKey("squares")
        result = dg.materialize(
            [module.defs.get_assets_def("squares")],
            resources={
                "raystep": RaystepResource(
                    binary=str(raystep_bin),
                    backend="local",
                    env={**raystep_env, "XDG_STATE_HOME": str(tmp_path / "state")},
                )
            },
        )
    assert result.success
    (mat,) = result.asset_materializations_for_node("squares")
    assert mat.metadata["sum_of_squares"].value == sum(i * i for i in range(100))


def test_a_spec_that_is_not_there_names_the_file_and_field(new_project: Path) -> None:
    folder = new_project / "new_project" / "defs" / "broken"
    folder.mkdir()
    (folder / "defs.yaml").write_text(
        "type: dagster_raystep.RaystepAssetComponent\n"
        "attributes:\n  spec: missing.yaml\n  key: broken\n"
    )
    check = _dg(new_project, "check", "defs")
    assert check.returncode != 0
    out = check.stdout + check.stderr
    assert f"{folder / 'defs.yaml'}: spec: 'missing.yaml' is not a file" in out, out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


LOCATIONS = """{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus
  locationOrLoadError { __typename ... on PythonError { message }
    ... on RepositoryLocation { repositories { assetNodes { assetKey { path } } } } } } } } }"""


def _locations(port: int) -> list[dict[str, Any]] | None:
    """The webserver's code locations, or None while it does not answer."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": LOCATIONS}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            body = json.load(response)
    except (OSError, http.client.HTTPException, ValueError):
        # Not answering yet, or not the webserver: the port was free when the
        # test chose it, and another process (a gRPC server, say) may have
        # taken it before dg dev did. The caller looks at dg dev's log.
        return None
    entries: list[dict[str, Any]] = body["data"]["workspaceOrError"]["locationEntries"]
    return entries


def test_dg_dev_serves_the_example(example_definitions: Path, tmp_path: Path) -> None:
    # A port chosen free can be taken by another process of the suite before
    # dg dev binds it; dg dev then says so in its log, and the test tries a
    # new port rather than waiting on someone else's server.
    for attempt in range(3):
        entries = _dg_dev_locations(example_definitions, tmp_path / f"dg-dev-{attempt}")
        if entries is not None:
            break
    else:
        pytest.fail("dg dev: its port was taken before it bound it, three times")
    (entry,) = entries
    location = entry["locationOrLoadError"]
    assert location["__typename"] == "RepositoryLocation", location
    keys = {
        tuple(n["assetKey"]["path"])
        for r in location["repositories"]
        for n in r["assetNodes"]
    }
    assert keys == {("ads_ranking_model",), ("ads_ranking_predictions",)}


def _dg_dev_locations(
    example_definitions: Path, home: Path
) -> list[dict[str, Any]] | None:
    """Run dg dev on a free port until its code location loads; return its entries.

    None when the port turned out to be taken before dg dev bound it.
    """
    home.mkdir()
    port = _free_port()
    env = {**os.environ, "VIRTUAL_ENV": sys.prefix, "DAGSTER_HOME": str(home)}
    env["PATH"] = os.pathsep.join([str(DG.parent), env.get("PATH", "")])
    log_path = home / "dg-dev.log"
    log = log_path.open("w")
    proc = subprocess.Popen(
        [str(DG), "dev", "--host", "127.0.0.1", "--port", str(port)],
        cwd=example_definitions.parent,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        entries = None
        while time.monotonic() < deadline:
            if "address already in use" in log_path.read_text().lower():
                return None
            assert proc.poll() is None, log_path.read_text()
            entries = _locations(port)
            if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                return entries
            time.sleep(1)
        pytest.fail(f"dg dev: no loaded location after 300s: {entries}")
    finally:
        _stop_group(proc)
        log.close()


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT proc's group, as Ctrl-C does; SIGKILL what is left after a minute."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=60)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
