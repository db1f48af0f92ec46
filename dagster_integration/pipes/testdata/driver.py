"""A Ray-driver stand-in: reports through the Python dagster-pipes package,
its messages on stdout among plain prints."""

from dagster_pipes import open_dagster_pipes

with open_dagster_pipes() as context:
    print("driver: starting", flush=True)
    context.log.info("driver says hi")
    print("x" * 100_000, flush=True)
    context.report_custom_message({"from": "driver"})
    context.report_asset_materialization(
        metadata={"loss": {"raw_value": 2.0, "type": "float"}, "epochs": 3},
        data_version="d1",
    )
    context.report_asset_check("driver_check", passed=True, severity="WARN")
    print("driver: done", flush=True)
