"""The partitions of a step, as raystep reads them from the Pipes context.

raystep turns the context's `partition_key`, `partition_key_range` and `partition_time_window`
into RAYSTEP_PARTITION_* for the Ray job. Dagster (1.13) fills the range and the time window only
for a step that targets one partition; a step that targets a range of them (a single-run
backfill, `BackfillPolicy.single_run()`) gets neither. `PartitionRangeInjector` adds them, so a
ranged step's Ray job gets RAYSTEP_PARTITION_KEY_RANGE_START/_END and the time window too. How
the context reaches raystep is left to the injector it wraps.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import dagster as dg
from dagster_pipes import PipesContextData, PipesParams


class PartitionRangeInjector(dg.PipesContextInjector):
    """PartitionRangeInjector injects the context through inner, with a ranged step's partitions."""

    def __init__(
        self,
        context: dg.AssetExecutionContext | dg.OpExecutionContext,
        inner: dg.PipesContextInjector,
    ) -> None:
        self._context = context
        self._inner = inner

    @contextmanager
    def inject_context(self, context_data: PipesContextData) -> Iterator[PipesParams]:
        """Inject context_data, with the partition key range and time window when it lacks them."""
        with self._inner.inject_context(
            with_partition_range(self._context, context_data)
        ) as params:
            yield params

    def no_messages_debug_text(self) -> str:
        """Return the wrapped injector's text."""
        return self._inner.no_messages_debug_text()


def with_partition_range(
    context: dg.AssetExecutionContext | dg.OpExecutionContext, data: PipesContextData
) -> PipesContextData:
    """Return data with context's partition key range and time window if it targets a range.

    A step for one partition, or for none, gets data as it is.
    """
    if data["partition_key_range"] is not None or not context.has_partition_key_range:
        return data
    keys = context.partition_key_range
    out = PipesContextData(**data)
    out["partition_key_range"] = {"start": keys.start, "end": keys.end}
    try:
        window = context.partition_time_window
    except dg.DagsterInvariantViolationError:  # not time-partitioned
        return out
    out["partition_time_window"] = {
        "start": window.start.isoformat(),
        "end": window.end.isoformat(),
    }
    return out
