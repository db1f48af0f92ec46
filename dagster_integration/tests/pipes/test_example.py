"""The Go example program under real Dagster: every metadata type, data
version, checks, custom messages, log levels, failure, panic and refusal of
invalid messages, across both context injectors and both message readers."""

import io
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    ExecuteInProcessResult,
    MetadataValue,
    PipesEnvContextInjector,
    PipesSubprocessClient,
    PipesTempFileContextInjector,
    PipesTempFileMessageReader,
    TableColumn,
    TableColumnConstraints,
    TableColumnDep,
    TableColumnLineage,
    TableRecord,
    TableSchema,
    asset,
    materialize,
)
from pipes_log_reader import PipesLogFileMessageReader, stdout_to

CHECKS = [
    AssetCheckSpec(name="rows_positive", asset=AssetKey(["go_asset"])),
    AssetCheckSpec(name="no_nulls", asset=AssetKey(["go_asset"])),
]


def _run(
    example_bin: Path,
    mode: str,
    tmp_path: Path,
    injector: str = "tempfile",
    reader: str = "tempfile",
) -> tuple[ExecuteInProcessResult, DagsterInstance, dict[str, Any]]:
    seen: dict[str, Any] = {}
    plain = io.StringIO()
    log = tmp_path / "stdout.log"
    command = [str(example_bin), "--mode", mode]
    env: dict[str, str] = {}
    if reader == "log":
        command, env = stdout_to(str(log), command)
    client = PipesSubprocessClient(
        context_injector=PipesEnvContextInjector()
        if injector == "env"
        else PipesTempFileContextInjector(),
        message_reader=PipesLogFileMessageReader(str(log), plain)
        if reader == "log"
        else PipesTempFileMessageReader(),
    )

    @asset(check_specs=CHECKS if mode == "full" else [])
    def go_asset(context: AssetExecutionContext, client: PipesSubprocessClient):
        invocation = client.run(context=context, command=command, env=env)
        seen["custom"] = list(invocation.get_custom_messages())
        yield from invocation.get_results()

    instance = DagsterInstance.ephemeral()
    result = materialize(
        [go_asset],
        resources={"client": client},
        instance=instance,
        raise_on_error=False,
    )
    seen["plain"] = plain.getvalue()
    return result, instance, seen


def _user_logs(instance: DagsterInstance, run_id: str) -> dict[str, int]:
    return {
        e.user_message: e.level
        for e in instance.all_logs(run_id)
        if e.user_message.startswith(("go says", "refused", "about to"))
    }


def _assert_all_types(metadata: dict[str, MetadataValue]) -> None:
    assert metadata["float_whole"] == MetadataValue.float(2.0)
    assert type(metadata["float_whole"].value) is float
    assert metadata["float_frac"] == MetadataValue.float(0.25)
    assert metadata["int"] == MetadataValue.int(7)
    assert type(metadata["int"].value) is int
    assert metadata["bool"] == MetadataValue.bool(True)
    assert metadata["text"] == MetadataValue.text("hello")
    assert metadata["url"] == MetadataValue.url("https://ray.io/dashboard")
    assert metadata["path"] == MetadataValue.path("/tmp/model.pt")
    assert metadata["notebook"] == MetadataValue.notebook("/tmp/eval.ipynb")
    assert metadata["md"] == MetadataValue.md("# Title")
    assert metadata["json"] == MetadataValue.json({"a": [1, 2.5, "x"]})
    assert metadata["dagster_run"] == MetadataValue.dagster_run(
        "0123abcd-0000-0000-0000-000000000000"
    )
    assert metadata["asset"] == MetadataValue.asset(AssetKey(["upstream", "table"]))
    assert metadata["null"] == MetadataValue.null()
    assert metadata["timestamp"] == MetadataValue.timestamp(1700000000.5)
    assert metadata["inferred"] == MetadataValue.text("inferred text")
    table = metadata["table"]
    assert table == MetadataValue.table(
        records=[
            TableRecord({"id": 1, "score": 1.0, "name": "a"}),
            TableRecord({"id": 2, "score": 0.5, "name": None}),
        ],
        schema=TableSchema(
            columns=[
                TableColumn(name="id", type="int", description="the id"),
                TableColumn(name="score", type="float"),
                TableColumn(
                    name="name",
                    type="string",
                    constraints=TableColumnConstraints(nullable=True, other=["short"]),
                ),
            ]
        ),
    )
    assert type(table.value.records[0].data["score"]) is float
    assert metadata["schema"] == MetadataValue.table_schema(
        TableSchema(columns=[TableColumn(name="id", type="int", tags={"pii": "no"})])
    )
    assert metadata["lineage"] == MetadataValue.column_lineage(
        TableColumnLineage(
            deps_by_column={
                "id": [
                    TableColumnDep(
                        asset_key=AssetKey(["upstream", "table"]), column_name="uid"
                    )
                ]
            }
        )
    )


@pytest.mark.parametrize("injector", ["tempfile", "env"])
@pytest.mark.parametrize("reader", ["tempfile", "log"])
def test_full(example_bin: Path, tmp_path: Path, injector: str, reader: str) -> None:
    result, instance, seen = _run(example_bin, "full", tmp_path, injector, reader)
    assert result.success
    [mat] = result.asset_materializations_for_node("go_asset")
    _assert_all_types(dict(mat.metadata))
    assert mat.tags["dagster/data_version"] == "v42"
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert evaluations["rows_positive"].passed
    assert evaluations["rows_positive"].severity == AssetCheckSeverity.ERROR
    assert evaluations["rows_positive"].metadata["rows"] == MetadataValue.int(3)
    assert not evaluations["no_nulls"].passed
    assert evaluations["no_nulls"].severity == AssetCheckSeverity.WARN
    assert seen["custom"] == [{"seq": i} for i in range(5)]
    assert _user_logs(instance, result.run_id) == {
        "go says DEBUG": 10,
        "go says INFO": 20,
        "go says WARNING": 30,
        "go says ERROR": 40,
        "go says CRITICAL": 50,
    }
    if reader == "log":
        # Plain stdout lines reach the reader's plain output, in order, and
        # no message line leaks into it.
        assert seen["plain"].splitlines() == ["plain line before messages"] + [
            f"plain line {i}" for i in range(5)
        ]


def _closed_exception(instance: DagsterInstance, run_id: str):
    events = [
        e
        for e in instance.all_logs(run_id, of_type=DagsterEventType.ENGINE_EVENT)
        if "closed with exception" in e.user_message
    ]
    assert len(events) == 1
    return events[0].dagster_event.engine_event_data.error


@pytest.mark.parametrize("reader", ["tempfile", "log"])
def test_failure_reports_exception_and_fails_step(
    example_bin: Path, tmp_path: Path, reader: str
) -> None:
    result, instance, _ = _run(example_bin, "fail", tmp_path, reader=reader)
    assert not result.success
    err = _closed_exception(instance, result.run_id)
    assert err.message == "train epoch 3: loss diverged"
    assert err.cls_name == "*fmt.wrapError"
    assert err.cause.message == "loss diverged"
    assert err.stack
    assert _user_logs(instance, result.run_id) == {"about to fail": 40}
    failures = instance.all_logs(result.run_id, of_type=DagsterEventType.STEP_FAILURE)
    assert len(failures) == 1


def test_panic_sends_closed_and_exits_nonzero(
    example_bin: Path, tmp_path: Path
) -> None:
    result, instance, _ = _run(example_bin, "panic", tmp_path)
    assert not result.success
    err = _closed_exception(instance, result.run_id)
    assert "assignment to entry in nil map" in err.message
    assert err.cls_name.startswith("panic(")
    assert any("main.step" in line for line in err.stack)
    [failure] = instance.all_logs(result.run_id, of_type=DagsterEventType.STEP_FAILURE)
    assert (
        "failed with code 2"
        in failure.dagster_event.step_failure_data.error.to_string()
    )


def test_invalid_messages_are_refused_in_go(example_bin: Path, tmp_path: Path) -> None:
    result, instance, _ = _run(example_bin, "invalid", tmp_path)
    assert result.success
    assert _user_logs(instance, result.run_id) == {
        f"refused {name}": 20 for name in ["nan", "level", "severity", "asset", "json"]
    }
    [mat] = result.asset_materializations_for_node("go_asset")
    assert mat.metadata["ok"] == MetadataValue.float(1.0)
    assert not any(
        "framework exception" in e.user_message
        for e in instance.all_logs(result.run_id)
    )
