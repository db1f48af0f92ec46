"""The community Pipes conformance scenarios, run against bin/pipes-conformance
with the real PipesSubprocessClient."""

import json
from pathlib import Path
from typing import Any

import pytest
from dagster import (
    AssetCheckResult,
    AssetCheckSeverity,
    AssetCheckSpec,
    AssetExecutionContext,
    AssetKey,
    DagsterEventType,
    DagsterInstance,
    MaterializeResult,
    MetadataValue,
    PipesEnvContextInjector,
    PipesFileMessageReader,
    PipesSubprocessClient,
    PipesTempFileContextInjector,
    PipesTempFileMessageReader,
    asset,
    materialize,
)

EXTRAS_CASES: list[dict[str, Any]] = [
    {},
    {"foo": "bar"},
    {"nested": {"a": [1, 2.5, None, True]}, "big": 2**62, "unicode": "ü✓"},
    {"none": None, "float": 2.0, "list": []},
]

CUSTOM_PAYLOADS: list[Any] = [
    None,
    "text",
    1,
    2.5,
    True,
    [1, "a"],
    {"a": {"b": [None]}},
]

INJECTORS = [PipesTempFileContextInjector(), PipesEnvContextInjector()]


def _client(**kwargs: Any) -> PipesSubprocessClient:
    return PipesSubprocessClient(**kwargs)


def _no_messages_warning(instance: DagsterInstance, run_id: str) -> bool:
    return any(
        "did not receive any messages" in (e.user_message or "")
        for e in instance.all_logs(run_id)
    )


@pytest.mark.parametrize("injector", INJECTORS, ids=["tempfile", "env"])
@pytest.mark.parametrize("reader_kind", ["tempfile", "file"])
def test_components(
    conformance_bin: Path, injector, reader_kind: str, tmp_path: Path
) -> None:
    extras_path = tmp_path / "extras.json"
    extras_path.write_text(json.dumps({"k": "v"}))
    reader = (
        PipesTempFileMessageReader()
        if reader_kind == "tempfile"
        else PipesFileMessageReader(str(tmp_path / "messages"))
    )

    @asset
    def my_asset(
        context: AssetExecutionContext, client: PipesSubprocessClient
    ) -> MaterializeResult:
        invocation = client.run(
            context=context,
            extras={"k": "v"},
            command=[
                str(conformance_bin),
                "--extras",
                str(extras_path),
                "--job-name",
                context.run.job_name,
                "--test-name",
                "test_components[x]",
            ],
        )
        assert list(invocation.get_custom_messages()) == [
            "Hello from external process!"
        ]
        return invocation.get_materialize_result()

    instance = DagsterInstance.ephemeral()
    result = materialize(
        [my_asset],
        resources={"client": _client(context_injector=injector, message_reader=reader)},
        instance=instance,
    )
    assert result.success
    assert not _no_messages_warning(instance, result.run_id)


@pytest.mark.parametrize("injector", INJECTORS, ids=["tempfile", "env"])
@pytest.mark.parametrize("extras", EXTRAS_CASES)
def test_extras(
    conformance_bin: Path, injector, extras: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "extras.json"
    path.write_text(json.dumps(extras))

    @asset
    def my_asset(
        context: AssetExecutionContext, client: PipesSubprocessClient
    ) -> MaterializeResult:
        return client.run(
            context=context,
            extras=extras,
            command=[
                str(conformance_bin),
                "--extras",
                str(path),
                "--test-name",
                "test_extras[1]",
            ],
        ).get_materialize_result()

    instance = DagsterInstance.ephemeral()
    result = materialize(
        [my_asset],
        resources={"client": _client(context_injector=injector)},
        instance=instance,
    )
    assert result.success
    assert not _no_messages_warning(instance, result.run_id)


def test_wrong_extras_fail_the_step(conformance_bin: Path, tmp_path: Path) -> None:
    path = tmp_path / "extras.json"
    path.write_text(json.dumps({"foo": "other"}))

    @asset
    def my_asset(
        context: AssetExecutionContext, client: PipesSubprocessClient
    ) -> MaterializeResult:
        return client.run(
            context=context,
            extras={"foo": "bar"},
            command=[
                str(conformance_bin),
                "--extras",
                str(path),
                "--test-name",
                "test_extras",
            ],
        ).get_materialize_result()

    result = materialize(
        [my_asset], resources={"client": _client()}, raise_on_error=False
    )
    assert not result.success


def test_error_reporting(conformance_bin: Path, tmp_path: Path) -> None:
    messages = tmp_path / "messages"

    @asset
    def my_asset(context: AssetExecutionContext, client: PipesSubprocessClient):
        yield from client.run(
            context=context,
            command=[str(conformance_bin), "--test-name", "test_error_reporting"],
        ).get_results()

    instance = DagsterInstance.ephemeral()
    reader = PipesFileMessageReader(str(messages), cleanup_file=False)
    result = materialize(
        [my_asset],
        resources={"client": _client(message_reader=reader)},
        instance=instance,
        raise_on_error=False,
    )
    assert not result.success
    lines = [json.loads(line) for line in messages.read_text().splitlines()]
    assert [m["method"] for m in lines] == ["opened", "closed"]
    exc = lines[-1]["params"]["exception"]
    assert exc["message"] == "Very bad error has happened!"
    assert exc["name"] == "*errors.errorString"
    assert exc["stack"]
    assert set(exc) == {"message", "stack", "name", "cause", "context"}
    engine = [
        e
        for e in instance.all_logs(result.run_id, of_type=DagsterEventType.ENGINE_EVENT)
        if "closed with exception" in (e.user_message or "")
    ]
    assert len(engine) == 1
    assert (
        engine[0].dagster_event.engine_event_data.error.message
        == "Very bad error has happened!"
    )
    assert not _no_messages_warning(instance, result.run_id)


def test_message_log(conformance_bin: Path) -> None:
    @asset
    def my_asset(context: AssetExecutionContext, client: PipesSubprocessClient):
        yield from client.run(
            context=context,
            command=[str(conformance_bin), "--test-name", "test_message_log"],
        ).get_results()

    instance = DagsterInstance.ephemeral()
    result = materialize([my_asset], resources={"client": _client()}, instance=instance)
    assert result.success
    levels = {
        e.user_message: e.level
        for e in instance.all_logs(result.run_id)
        if (e.user_message or "").endswith(" message")
    }
    assert levels == {
        "Debug message": 10,
        "Info message": 20,
        "Warning message": 30,
        "Error message": 40,
        "Critical message": 50,
    }


@pytest.mark.parametrize("payload", CUSTOM_PAYLOADS)
def test_message_report_custom_message(
    conformance_bin: Path, payload: Any, tmp_path: Path
) -> None:
    path = tmp_path / "payload.json"
    path.write_text(json.dumps({"payload": payload}))

    @asset
    def my_asset(
        context: AssetExecutionContext, client: PipesSubprocessClient
    ) -> MaterializeResult:
        invocation = client.run(
            context=context,
            command=[
                str(conformance_bin),
                "--custom-payload",
                str(path),
                "--test-name",
                "test_message_report_custom_message[p]",
            ],
        )
        got = list(invocation.get_custom_messages())
        assert got == [payload]
        if isinstance(payload, float):
            assert isinstance(got[0], float)
        return invocation.get_materialize_result()

    assert materialize([my_asset], resources={"client": _client()}).success


# The metadata Dagster's community conformance suite expects on every
# materialization and asset check (its metadata.json).
SUITE_METADATA: dict[str, dict[str, Any]] = json.loads(
    (
        Path(__file__).resolve().parents[2]
        / "pipes/cmd/pipes-conformance/testdata/metadata.json"
    ).read_text()
)


def _suite_value(entry: dict[str, Any]) -> MetadataValue:
    """Build the value the suite compares with, the way the suite builds it."""
    raw, kind = entry["raw_value"], entry["type"]
    if kind == "asset":
        return MetadataValue.asset(AssetKey.from_user_string(raw))
    if kind == "null":
        return MetadataValue.null()
    return getattr(MetadataValue, kind)(raw)


def _check_sample_metadata(metadata: dict[str, Any]) -> None:
    assert metadata["float"] == MetadataValue.float(0.1)
    assert isinstance(metadata["float"].value, float)
    assert metadata["int"] == MetadataValue.int(1)
    assert metadata["bool_true"] == MetadataValue.bool(True)
    assert metadata["bool_false"] == MetadataValue.bool(False)
    assert metadata["url"] == MetadataValue.url("https://dagster.io")
    assert metadata["path"] == MetadataValue.path("/dev/null")
    assert metadata["null"] == MetadataValue.null()
    assert metadata["md"] == MetadataValue.md("**markdown**")
    assert metadata["json"] == MetadataValue.json(
        {
            "quux": {"a": 1, "b": 2},
            "corge": None,
            "qux": [1, 2, 3],
            "foo": "bar",
            "baz": 1,
        }
    )
    assert metadata["dagster_run"] == MetadataValue.dagster_run(
        "db892d7f-0031-4747-973d-22e8b9095d9d"
    )
    assert metadata["asset"] == MetadataValue.asset(AssetKey(["foo", "bar"]))
    assert metadata["text"] == MetadataValue.text("hello")
    assert metadata["notebook"] == MetadataValue.notebook("notebook.ipynb")
    assert metadata == {k: _suite_value(e) for k, e in SUITE_METADATA.items()}


@pytest.mark.parametrize("data_version", [None, "alpha"])
@pytest.mark.parametrize("asset_key", [None, "my_asset"])
def test_message_report_asset_materialization(
    conformance_bin: Path,
    data_version: str | None,
    asset_key: str | None,
    tmp_path: Path,
) -> None:
    spec: dict[str, str] = {}
    if data_version is not None:
        spec["dataVersion"] = data_version
    if asset_key is not None:
        spec["assetKey"] = asset_key
    path = tmp_path / "mat.json"
    path.write_text(json.dumps(spec))

    @asset
    def my_asset(
        context: AssetExecutionContext, client: PipesSubprocessClient
    ) -> MaterializeResult:
        mat = client.run(
            context=context,
            command=[
                str(conformance_bin),
                "--report-asset-materialization",
                str(path),
                "--test-name",
                "test_message_report_asset_materialization[x]",
            ],
        ).get_materialize_result()
        assert (mat.data_version.value if mat.data_version else None) == data_version
        _check_sample_metadata(dict(mat.metadata or {}))
        return mat

    result = materialize([my_asset], resources={"client": _client()})
    assert result.success
    [event] = result.asset_materializations_for_node("my_asset")
    _check_sample_metadata(dict(event.metadata))
    if data_version is not None:
        assert event.tags["dagster/data_version"] == data_version


@pytest.mark.parametrize("passed", [True, False])
@pytest.mark.parametrize("severity", ["WARN", "ERROR"])
@pytest.mark.parametrize("asset_key", [None, "my_asset"])
def test_message_report_asset_check(
    conformance_bin: Path,
    passed: bool,
    severity: str,
    asset_key: str | None,
    tmp_path: Path,
) -> None:
    spec: dict[str, Any] = {
        "passed": passed,
        "severity": severity,
        "checkName": "my_check",
    }
    if asset_key is not None:
        spec["assetKey"] = asset_key
    path = tmp_path / "check.json"
    path.write_text(json.dumps(spec))

    @asset(check_specs=[AssetCheckSpec(name="my_check", asset=AssetKey(["my_asset"]))])
    def my_asset(context: AssetExecutionContext, client: PipesSubprocessClient):
        results = client.run(
            context=context,
            command=[
                str(conformance_bin),
                "--report-asset-check",
                str(path),
                "--test-name",
                "test_message_report_asset_check[x]",
            ],
        ).get_results()
        check = results[0]
        assert isinstance(check, AssetCheckResult)
        assert check.passed == passed
        _check_sample_metadata(dict(check.metadata or {}))
        yield from results

    result = materialize([my_asset], resources={"client": _client()})
    assert result.success
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.passed == passed
    assert evaluation.severity == AssetCheckSeverity(severity)
    assert evaluation.check_name == "my_check"
