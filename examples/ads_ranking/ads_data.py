"""Deterministic click data, the model file format and ranking metrics for the ads_ranking example.

Every row is a pure function of (seed, split, row id): features and the click label come from a
counter-based hash, so any shard, Ray task or Ray Data batch regenerates exactly the same rows
no matter how the work is split. The click model behind the data (the "world") is fixed, so a
model trained with one seed can be evaluated on data drawn with another.

A run for a Dagster partition (raystep sets RAYSTEP_PARTITION_KEY to the day, YYYY-MM-DD) works on
that day's data: the day is mixed into the seed (day_seed), and the day's model and predictions
live in a directory of their own (model_dir, day_dir), so every day keeps its model and a
re-run of one day reproduces it exactly. Without a partition key the drivers use the seed and
directories as given.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

FEATURES: tuple[str, ...] = (
    "ad_ctr_prior",
    "advertiser_quality",
    "bid_log",
    "creative_age_days",
    "position",
    "query_ad_similarity",
    "user_ad_affinity",
    "user_clicks_7d",
    "user_impressions_7d",
    "user_tenure_days",
    "hour_of_day_sin",
    "hour_of_day_cos",
    "device_mobile",
    "page_load_ms",
    "landing_page_quality",
    "campaign_budget_left",
)
"""FEATURES names the dense feature columns, in model order."""

SPLITS: dict[str, int] = {"train": 1, "eval": 2, "inference": 3}
"""SPLITS gives each data split its own salt so that the splits never share rows."""

DEFAULT_MODEL_DIR = "/tmp/raystep-examples/ads_ranking/model"
DEFAULT_PREDICTIONS_DIR = "/tmp/raystep-examples/ads_ranking/predictions"
PARTITION_KEY_ENV = "RAYSTEP_PARTITION_KEY"
MODEL_WEIGHTS_FILE = "model.npz"
MODEL_INFO_FILE = "model.json"

_WORLD_SALT = 0x5EED_AD5
_LABEL_SLOT = len(FEATURES) + 1
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """Return the SplitMix64 finaliser of x (uint64, wrapping arithmetic)."""
    with np.errstate(over="ignore"):
        z = (x + np.uint64(0x9E3779B97F4A7C15)) & _MASK64
        z = ((z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & _MASK64
        z = ((z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & _MASK64
        return z ^ (z >> np.uint64(31))


def _uniform(seed: int, split: str, ids: np.ndarray, slot: int) -> np.ndarray:
    """Return one uniform draw in (0, 1) per id for a (seed, split, slot) stream."""
    stream = _splitmix64(
        np.uint64(seed & 0xFFFFFFFF) << np.uint64(8) | np.uint64(SPLITS[split])
    )
    stream = _splitmix64(stream ^ np.uint64(slot))
    bits = _splitmix64(ids.astype(np.uint64) ^ stream)
    return ((bits >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)


def _world() -> tuple[np.ndarray, float]:
    """Return the fixed true click model (weights, bias) that generates every split."""
    rng = np.random.default_rng(_WORLD_SALT)
    weights = rng.normal(0.0, 0.55, size=len(FEATURES))
    return weights, -1.6


def features(seed: int, split: str, ids: np.ndarray) -> np.ndarray:
    """Return the float32 feature matrix (len(ids), len(FEATURES)) of the given rows."""
    columns = []
    for slot in range(0, len(FEATURES), 2):
        u1 = _uniform(seed, split, ids, slot)
        u2 = _uniform(seed, split, ids, slot + 1)
        radius = np.sqrt(-2.0 * np.log(u1))
        columns.append(radius * np.cos(2.0 * np.pi * u2))
        columns.append(radius * np.sin(2.0 * np.pi * u2))
    return np.stack(columns[: len(FEATURES)], axis=1).astype(np.float32)


def clicks(seed: int, split: str, ids: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Return the float32 click labels (0 or 1) of rows with features x."""
    weights, bias = _world()
    p = sigmoid(x.astype(np.float64) @ weights + bias)
    return (_uniform(seed, split, ids, _LABEL_SLOT) < p).astype(np.float32)


def shard(
    seed: int, split: str, rows: int, shards: int, index: int
) -> tuple[np.ndarray, np.ndarray]:
    """Return (features, clicks) of shard index out of shards over rows rows of a split."""
    ids = np.arange(index, rows, shards, dtype=np.int64)
    x = features(seed, split, ids)
    return x, clicks(seed, split, ids, x)


def sigmoid(z: np.ndarray) -> np.ndarray:
    """Return the logistic function of z, computed without overflow."""
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Return the ROC AUC of scores against binary labels (ties get average ranks)."""
    labels = labels.astype(bool)
    positives = int(labels.sum())
    negatives = labels.size - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    order = np.argsort(scores, kind="mergesort")
    _, inverse, counts = np.unique(
        scores[order], return_inverse=True, return_counts=True
    )
    ends = np.cumsum(counts)
    average_rank = (ends - (counts - 1) / 2.0)[inverse]
    ranks = np.empty(scores.size, dtype=np.float64)
    ranks[order] = average_rank
    return float(
        (ranks[labels].sum() - positives * (positives + 1) / 2.0)
        / (positives * negatives)
    )


def log_loss(labels: np.ndarray, probabilities: np.ndarray) -> float:
    """Return the mean binary cross-entropy of probabilities against labels."""
    p = np.clip(probabilities.astype(np.float64), 1e-7, 1.0 - 1e-7)
    y = labels.astype(np.float64)
    return float(-np.mean(y * np.log(p) + (1.0 - y) * np.log1p(-p)))


@dataclass(frozen=True)
class Model:
    """Model is a logistic-regression click model: weights, bias and how it was trained."""

    weights: np.ndarray
    bias: float
    info: dict

    @property
    def version(self) -> str:
        """Return a short content hash of the parameters, stable across runs with the same seed."""
        digest = hashlib.sha256(self.weights.astype(np.float64).tobytes())
        digest.update(np.float64(self.bias).tobytes())
        return digest.hexdigest()[:16]

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Return click probabilities for the feature matrix x."""
        return sigmoid(x.astype(np.float64) @ self.weights + self.bias)


def partition_day() -> str | None:
    """Return the day (YYYY-MM-DD) this run is for, from RAYSTEP_PARTITION_KEY, or None.

    A key that is not a day is an error that names it: the example's assets are daily-partitioned.
    """
    key = os.environ.get(PARTITION_KEY_ENV)
    if not key:
        return None
    try:
        if len(key) != 10:
            raise ValueError(key)
        date.fromisoformat(key)
    except ValueError:
        raise ValueError(
            f"{PARTITION_KEY_ENV}={key!r}: expected a day partition key, YYYY-MM-DD"
        ) from None
    return key


def day_seed(seed: int, day: str | None) -> int:
    """Return the data seed for day: seed itself without a day, else seed mixed with the date.

    Different days draw different rows; the same day always draws the same ones.
    """
    if day is None:
        return seed
    return (seed * 1_000_003 + date.fromisoformat(day).toordinal()) & 0xFFFFFFFF


def day_metadata(day: str | None) -> dict[str, str]:
    """Return the metadata that says which day a result is for: {"day": day}, or none."""
    return {"day": day} if day else {}


def day_dir(base: Path, day: str | None) -> Path:
    """Return day's directory under base, or base itself without a day."""
    return base / day if day else base


def model_dir(day: str | None = None) -> Path:
    """Return the model directory from ADS_MODEL_DIR (or the example default), for day if given."""
    return day_dir(Path(os.environ.get("ADS_MODEL_DIR") or DEFAULT_MODEL_DIR), day)


def save_model(model: Model, directory: Path) -> Path:
    """Write the model atomically (weights as .npz, description as JSON) and return its directory."""
    directory.mkdir(parents=True, exist_ok=True)
    info = {**model.info, "version": model.version, "features": list(FEATURES)}
    _atomic_write(
        directory / MODEL_WEIGHTS_FILE,
        lambda f: np.savez(f, weights=model.weights, bias=model.bias),
    )
    _atomic_write(
        directory / MODEL_INFO_FILE,
        lambda f: f.write(json.dumps(info, indent=2).encode()),
    )
    return directory


def load_model(directory: Path) -> Model:
    """Read a model written by save_model; a missing model is a clear error."""
    weights_path = directory / MODEL_WEIGHTS_FILE
    if not weights_path.exists():
        raise FileNotFoundError(
            f"no model at {weights_path}: run train.py first (ADS_MODEL_DIR={directory})"
        )
    with np.load(weights_path) as data:
        weights, bias = data["weights"], float(data["bias"])
    info = json.loads((directory / MODEL_INFO_FILE).read_text())
    if info.get("features") != list(FEATURES):
        raise ValueError(
            f"model at {directory} was trained on other features: {info.get('features')}"
        )
    return Model(weights=weights, bias=bias, info=info)


def _atomic_write(path: Path, write) -> None:
    """Write path through a temporary file in the same directory, then rename it into place."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
