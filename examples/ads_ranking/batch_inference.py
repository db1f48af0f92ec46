"""Score a batch of ad impressions with the ads click model on Ray Data and write Parquet.

`ray.data.range` yields row ids; `map_batches` regenerates each row's features from its id
(deterministic for a seed, whatever the batching) and scores them with the model. Predictions
(id, click probability, model version) are written as Parquet to ADS_PREDICTIONS_DIR, replacing
what a previous run wrote there; a day's partition scores that day's ads with that day's model
into ADS_PREDICTIONS_DIR/DAY (see ads_data). Row count and throughput go to Dagster through Pipes.

    python batch_inference.py --seed 7 --rows 200000
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import ads_data
import numpy as np
import pyarrow.parquet as pq
import ray
from ads_report import Report

ASSET = "ads_ranking_predictions"


class Scorer:
    """Scorer turns a batch of row ids into click predictions with one model."""

    def __init__(self, model: ads_data.Model, seed: int) -> None:
        self._model = model
        self._seed = seed

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ids = batch["id"]
        score = self._model.predict(
            ads_data.features(self._seed, "inference", ids)
        ).astype(np.float32)
        return {
            "id": ids,
            "click_probability": score,
            "model_version": np.full(ids.shape, self._model.version),
        }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--rows", type=int, default=200_000, help="impressions to score"
    )
    parser.add_argument(
        "--blocks", type=int, default=4, help="Ray Data blocks (and Parquet files)"
    )
    parser.add_argument("--batch-size", type=int, default=8192)
    args = parser.parse_args()
    if min(args.rows, args.blocks, args.batch_size) < 1:
        parser.error("--rows, --blocks and --batch-size must be positive")
    try:
        args.day = ads_data.partition_day()
    except ValueError as err:
        parser.error(str(err))
    args.seed = ads_data.day_seed(args.seed, args.day)
    return args


def predictions_dir(day: str | None) -> Path:
    """Return the output directory from ADS_PREDICTIONS_DIR (or the example default), for day."""
    return ads_data.day_dir(
        Path(os.environ.get("ADS_PREDICTIONS_DIR") or ads_data.DEFAULT_PREDICTIONS_DIR),
        day,
    )


def written(directory: Path) -> tuple[int, int, int, float]:
    """Return (rows, files, bytes, mean click probability) of the Parquet files in directory."""
    files = sorted(directory.glob("*.parquet"))
    rows, size, total = 0, 0, 0.0
    for path in files:
        table = pq.read_table(path, columns=["click_probability"])
        rows += table.num_rows
        total += float(np.sum(table.column(0).to_numpy(), dtype=np.float64))
        size += path.stat().st_size
    return rows, len(files), size, total / rows if rows else float("nan")


def main() -> None:
    args = parse_args()
    with Report("batch_inference") as report:
        model = ads_data.load_model(ads_data.model_dir(args.day))
        out = predictions_dir(args.day)
        ray.init(log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        report.log(f"scoring {args.rows} rows with model {model.version} into {out}")
        started = time.perf_counter()
        dataset = ray.data.range(
            args.rows, override_num_blocks=args.blocks
        ).map_batches(
            Scorer(model, args.seed),
            batch_size=args.batch_size,
            batch_format="numpy",
            num_cpus=0.5,
        )
        dataset.write_parquet(str(out), mode="overwrite")
        elapsed = time.perf_counter() - started
        rows, files, size, mean = written(out)
        if rows != args.rows:
            raise RuntimeError(
                f"wrote {rows} predictions to {out}, expected {args.rows}"
            )
        report.log(
            f"scored {rows} rows in {elapsed:.2f}s ({rows / elapsed:,.0f} rows/s)"
        )
        report.materialize(
            report.asset_key(ASSET),
            {
                "rows": rows,
                "rows_per_second": rows / elapsed,
                "seconds": round(elapsed, 3),
                "files": files,
                "bytes": size,
                "mean_click_probability": mean,
                "model_version": model.version,
                "seed": args.seed,
                **ads_data.day_metadata(args.day),
                "path": out,
            },
            data_version=f"{model.version}-{args.seed}-{args.rows}",
        )


if __name__ == "__main__":
    main()
