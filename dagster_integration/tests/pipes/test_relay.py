"""A Go program relays a Python dagster-pipes child that writes its messages
to stdout (how a Ray driver's messages reach raystep), amending the child's
materialization before forwarding it to real Dagster."""

import sys
from pathlib import Path

import pytest
from dagster import (
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    DagsterInstance,
    MetadataValue,
    PipesEnvContextInjector,
    PipesSubprocessClient,
    PipesTempFileContextInjector,
    asset,
    materialize,
)

DRIVER = Path(__file__).resolve().parents[2] / "pipes" / "testdata" / "driver.py"


@pytest.mark.parametrize("injector", ["tempfile", "env"])
def test_relay_python_child(
    example_bin: Path, injector: str, capfd: pytest.CaptureFixture[str]
) -> None:
    seen: dict[str, list] = {}

    @asset(
        check_specs=[AssetCheckSpec(name="driver_check", asset=AssetKey(["relayed"]))]
    )
    def relayed(context: AssetExecutionContext, client: PipesSubprocessClient):
        invocation = client.run(
            context=context,
            command=[
                str(example_bin),
                "--mode",
                "relay",
                "--",
                sys.executable,
                str(DRIVER),
            ],
        )
        seen["custom"] = list(invocation.get_custom_messages())
        yield from invocation.get_results()

    client = PipesSubprocessClient(
        context_injector=PipesEnvContextInjector()
        if injector == "env"
        else PipesTempFileContextInjector()
    )
    instance = DagsterInstance.ephemeral()
    result = materialize([relayed], resources={"client": client}, instance=instance)
    assert result.success
    [mat] = result.asset_materializations_for_node("relayed")
    assert mat.metadata["loss"] == MetadataValue.float(2.0)
    assert type(mat.metadata["loss"].value) is float
    assert mat.metadata["epochs"] == MetadataValue.int(3)
    assert mat.metadata["relayed_by"] == MetadataValue.text("pipes-example")
    assert mat.tags["dagster/data_version"] == "d1"
    [check] = result.get_asset_check_evaluations()
    assert check.passed
    assert check.severity == AssetCheckSeverity.WARN
    assert seen["custom"] == [{"from": "driver"}]
    logs = {e.user_message: e.level for e in instance.all_logs(result.run_id)}
    assert logs.get("driver says hi") == 20
    assert not any("child closed with" in m for m in logs)
    out = capfd.readouterr().out
    plain = [line for line in out.splitlines() if line.startswith(("driver:", "xxx"))]
    assert plain == ["driver: starting", "x" * 100_000, "driver: done"]
    assert "__dagster_pipes_version" not in out
