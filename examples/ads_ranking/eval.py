"""Evaluate the ads click model on held-out data and report an AUC asset check.

Ray tasks regenerate and score shards of the eval split in parallel; the driver computes AUC,
log-loss and calibration. The check `auc_above_threshold` (severity ERROR) passes when the
held-out AUC is at least ADS_AUC_THRESHOLD (default 0.70); its `summary` metadata says why in one
sentence ("auc 0.886 < threshold 0.99"), which dagster-raystep shows as the result's description.
It belongs to the model asset: the asset named by a matching entry in the Pipes extras'
"asset_checks", else ADS_MODEL_ASSET_KEY, else the step's single asset, else `ads_ranking_model`.
A failing check does not fail the step. For a day's partition it checks that day's model on that
day's held-out data (see ads_data).

    python eval.py --seed 7
"""

from __future__ import annotations

import argparse
import os
import time

import ads_data
import numpy as np
import ray
from ads_report import Report

CHECK = "auc_above_threshold"
DEFAULT_ASSET = "ads_ranking_model"
DEFAULT_THRESHOLD = 0.70


@ray.remote(num_cpus=0.5)
def score_shard(
    model: ads_data.Model, seed: int, rows: int, shards: int, index: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return (labels, predicted click probabilities) of one shard of the eval split."""
    x, y = ads_data.shard(seed, "eval", rows, shards, index)
    return y, model.predict(x)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rows", type=int, default=100_000, help="held-out rows")
    parser.add_argument("--shards", type=int, default=4)
    args = parser.parse_args()
    if min(args.rows, args.shards) < 1:
        parser.error("--rows and --shards must be positive")
    try:
        args.day = ads_data.partition_day()
    except ValueError as err:
        parser.error(str(err))
    args.seed = ads_data.day_seed(args.seed, args.day)
    return args


def threshold() -> float:
    """Return the AUC threshold from ADS_AUC_THRESHOLD; a malformed value is an error."""
    raw = os.environ.get("ADS_AUC_THRESHOLD", "").strip()
    if not raw:
        return DEFAULT_THRESHOLD
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit(
            f"ADS_AUC_THRESHOLD must be a number between 0 and 1, got {raw!r}"
        ) from None
    if not 0.0 <= value <= 1.0:
        raise SystemExit(f"ADS_AUC_THRESHOLD must be between 0 and 1, got {value}")
    return value


def summary(auc: float, limit: float) -> str:
    """Return the check's verdict as a sentence, e.g. "auc 0.886 < threshold 0.99"."""
    return f"auc {auc:.3f} {'>=' if auc >= limit else '<'} threshold {limit:g}"


def model_asset_key(report: Report) -> str:
    """Return the asset key the check belongs to (see the module doc)."""
    for entry in report.extras.get("asset_checks") or []:
        if (
            isinstance(entry, dict)
            and entry.get("check_name") == CHECK
            and entry.get("asset_key")
        ):
            return str(entry["asset_key"])
    return os.environ.get("ADS_MODEL_ASSET_KEY") or report.asset_key(DEFAULT_ASSET)


def main() -> None:
    args = parse_args()
    with Report("eval") as report:
        limit = threshold()
        started = time.perf_counter()
        model = ads_data.load_model(ads_data.model_dir(args.day))
        ray.init(log_to_driver=False)
        report.log(
            f"evaluating model {model.version} on {args.rows} held-out rows in {args.shards} Ray tasks"
        )
        model_ref = ray.put(model)
        parts = ray.get(
            [
                score_shard.remote(model_ref, args.seed, args.rows, args.shards, i)
                for i in range(args.shards)
            ]
        )
        labels = np.concatenate([y for y, _ in parts])
        scores = np.concatenate([p for _, p in parts])
        auc = ads_data.auc(labels, scores)
        passed = bool(auc >= limit)
        verdict = summary(auc, limit)
        report.log(f"held-out {verdict}: {'pass' if passed else 'FAIL'}")
        report.check(
            model_asset_key(report),
            CHECK,
            passed,
            {
                "summary": verdict,
                "auc": auc,
                "threshold": limit,
                "log_loss": ads_data.log_loss(labels, scores),
                "click_rate": float(labels.mean()),
                "mean_prediction": float(scores.mean()),
                "rows": int(labels.size),
                "seed": args.seed,
                **ads_data.day_metadata(args.day),
                "model_version": model.version,
                "eval_seconds": round(time.perf_counter() - started, 3),
            },
        )


if __name__ == "__main__":
    main()
