"""Train the ads click model: data-parallel logistic regression over Ray actors.

Each actor owns some shards of generated click data. Every step the driver broadcasts the
weights, each shard returns the gradient of its next mini-batch, and the driver averages them
(weighted by rows, summed in shard order so the result does not depend on how many actors run).
The model goes to ADS_MODEL_DIR (ADS_MODEL_DIR/DAY for a day's partition, on that day's data:
see ads_data); loss, AUC, rows and epochs go to Dagster through Pipes.

    python train.py --epochs 3 --seed 7
"""

from __future__ import annotations

import argparse
import time

import ads_data
import numpy as np
import ray
from ads_report import Report

ASSET = "ads_ranking_model"


@ray.remote
class ShardWorker:
    """ShardWorker holds shards of the training split and computes their mini-batch gradients."""

    def __init__(
        self, seed: int, rows: int, shards: int, indices: list[int], batch_size: int
    ) -> None:
        self._seed = seed
        self._batch_size = batch_size
        self._data = {
            i: ads_data.shard(seed, "train", rows, shards, i) for i in indices
        }
        self._order: dict[int, np.ndarray] = {}

    def start_epoch(self, epoch: int) -> int:
        """Shuffle every shard for this epoch and return the number of steps it takes."""
        steps = 0
        for index, (x, _) in self._data.items():
            rng = np.random.default_rng([self._seed, epoch, index])
            self._order[index] = rng.permutation(len(x))
            steps = max(steps, -(-len(x) // self._batch_size))
        return steps

    def gradients(
        self, weights: np.ndarray, bias: float, step: int
    ) -> dict[int, tuple]:
        """Return, per shard, (gradient sum of weights, of bias, loss sum, rows) of batch step."""
        out = {}
        for index, (x, y) in self._data.items():
            rows = self._order[index][
                step * self._batch_size : (step + 1) * self._batch_size
            ]
            xb, yb = x[rows].astype(np.float64), y[rows].astype(np.float64)
            p = ads_data.sigmoid(xb @ weights + bias)
            error = p - yb
            pc = np.clip(p, 1e-7, 1 - 1e-7)
            loss = -np.sum(yb * np.log(pc) + (1 - yb) * np.log1p(-pc))
            out[index] = (xb.T @ error, float(error.sum()), float(loss), len(rows))
        return out

    def score(
        self, weights: np.ndarray, bias: float
    ) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Return, per shard, (labels, predicted click probabilities) over the whole shard."""
        return {
            i: (y, ads_data.sigmoid(x.astype(np.float64) @ weights + bias))
            for i, (x, y) in self._data.items()
        }


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rows", type=int, default=200_000, help="training rows")
    parser.add_argument(
        "--shards", type=int, default=4, help="data shards (fixes the result)"
    )
    parser.add_argument(
        "--workers", type=int, default=2, help="Ray actors sharing the shards"
    )
    parser.add_argument(
        "--worker-cpus", type=float, default=0.5, help="CPUs reserved per actor"
    )
    parser.add_argument(
        "--batch-size", type=int, default=2048, help="rows per shard per step"
    )
    parser.add_argument("--learning-rate", type=float, default=0.5)
    parser.add_argument("--momentum", type=float, default=0.9)
    args = parser.parse_args()
    if min(args.epochs, args.rows, args.shards, args.workers, args.batch_size) < 1:
        parser.error(
            "--epochs, --rows, --shards, --workers and --batch-size must be positive"
        )
    try:
        args.day = ads_data.partition_day()
    except ValueError as err:
        parser.error(str(err))
    args.seed = ads_data.day_seed(args.seed, args.day)
    return args


def merge(
    parts: list[dict[int, tuple]], shards: int
) -> tuple[np.ndarray, float, float]:
    """Return the row-averaged weight gradient, bias gradient and loss over all shards."""
    by_shard = {k: v for part in parts for k, v in part.items()}
    grad_w = sum(by_shard[i][0] for i in range(shards))
    grad_b = sum(by_shard[i][1] for i in range(shards))
    loss = sum(by_shard[i][2] for i in range(shards))
    rows = sum(by_shard[i][3] for i in range(shards))
    return grad_w / rows, grad_b / rows, loss / rows


def evaluate(
    workers: list, weights: np.ndarray, bias: float, shards: int
) -> tuple[float, float, float]:
    """Return (log-loss, AUC, click rate) of the model over the whole training split."""
    parts = ray.get([w.score.remote(weights, bias) for w in workers])
    by_shard = {k: v for part in parts for k, v in part.items()}
    labels = np.concatenate([by_shard[i][0] for i in range(shards)])
    scores = np.concatenate([by_shard[i][1] for i in range(shards)])
    return (
        ads_data.log_loss(labels, scores),
        ads_data.auc(labels, scores),
        float(labels.mean()),
    )


def train(args: argparse.Namespace, report: Report) -> tuple[ads_data.Model, dict]:
    """Run the epochs on Ray and return the model and its training metrics."""
    workers_n = min(args.workers, args.shards)
    workers = [
        ShardWorker.options(num_cpus=args.worker_cpus).remote(
            args.seed,
            args.rows,
            args.shards,
            list(range(w, args.shards, workers_n)),
            args.batch_size,
        )
        for w in range(workers_n)
    ]
    weights, bias = np.zeros(len(ads_data.FEATURES)), 0.0
    velocity_w, velocity_b = np.zeros_like(weights), 0.0
    history = []
    for epoch in range(1, args.epochs + 1):
        steps = max(ray.get([w.start_epoch.remote(epoch) for w in workers]))
        batch_losses = []
        for step in range(steps):
            grad_w, grad_b, loss = merge(
                ray.get([w.gradients.remote(weights, bias, step) for w in workers]),
                args.shards,
            )
            velocity_w = args.momentum * velocity_w - args.learning_rate * grad_w
            velocity_b = args.momentum * velocity_b - args.learning_rate * grad_b
            weights, bias = weights + velocity_w, bias + velocity_b
            batch_losses.append(loss)
        loss, auc, ctr = evaluate(workers, weights, bias, args.shards)
        history.append({"epoch": epoch, "loss": round(loss, 6), "auc": round(auc, 6)})
        report.log(
            f"epoch {epoch}/{args.epochs}: {steps} steps, loss {loss:.4f}, auc {auc:.4f}"
        )
    info = {
        "seed": args.seed,
        **ads_data.day_metadata(args.day),
        "epochs": args.epochs,
        "rows": args.rows,
        "shards": args.shards,
        "history": history,
    }
    return ads_data.Model(weights=weights, bias=float(bias), info=info), {
        "loss": loss,
        "auc": auc,
        "ctr": ctr,
    }


def main() -> None:
    args = parse_args()
    with Report("train") as report:
        started = time.perf_counter()
        ray.init(log_to_driver=False)
        resources = ray.cluster_resources()
        report.log(
            f"training on Ray {ray.__version__}: {args.rows} rows in {args.shards} shards, "
            f"{min(args.workers, args.shards)} actors, cluster CPUs {resources.get('CPU', 0):g}"
        )
        model, metrics = train(args, report)
        directory = ads_data.save_model(model, ads_data.model_dir(args.day))
        report.materialize(
            report.asset_key(ASSET),
            {
                "loss": metrics["loss"],
                "auc": metrics["auc"],
                "click_rate": metrics["ctr"],
                "rows": args.rows,
                "epochs": args.epochs,
                "shards": args.shards,
                "workers": min(args.workers, args.shards),
                "seed": args.seed,
                **ads_data.day_metadata(args.day),
                "model_version": model.version,
                "model_dir": directory,
                "train_seconds": round(time.perf_counter() - started, 3),
                "ray_version": ray.__version__,
            },
            data_version=model.version,
        )


if __name__ == "__main__":
    main()
