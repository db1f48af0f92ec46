"""ads_data, the examples' shared module: deterministic rows, correct metrics, a model file that round-trips."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest


@pytest.fixture(scope="module")
def ads_data(repo: Path) -> Iterator[ModuleType]:
    name = "ads_data_under_test"
    path = repo / "examples" / "ads_ranking" / "ads_data.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # Dataclasses look their module up in sys.modules while the class is built.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[name]


def _auc_by_pairs(labels: np.ndarray, scores: np.ndarray) -> float:
    positives, negatives = scores[labels == 1], scores[labels == 0]
    wins = (positives[:, None] > negatives[None, :]).sum() + 0.5 * (
        positives[:, None] == negatives[None, :]
    ).sum()
    return float(wins / (positives.size * negatives.size))


@pytest.mark.parametrize(
    ("labels", "scores"),
    [
        pytest.param([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8], id="textbook"),
        pytest.param([1, 0, 1, 0, 1], [0.5, 0.5, 0.5, 0.2, 0.9], id="ties"),
        pytest.param([1, 1, 0, 0], [0.1, 0.2, 0.3, 0.4], id="inverted"),
    ],
)
def test_auc_matches_pairwise_definition(
    ads_data: ModuleType, labels: list[int], scores: list[float]
) -> None:
    y, s = np.array(labels), np.array(scores)
    assert ads_data.auc(y, s) == pytest.approx(_auc_by_pairs(y, s))


def test_auc_random_against_pairs(ads_data: ModuleType) -> None:
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 500)
    s = np.round(rng.random(500), 2)  # rounding makes ties
    assert ads_data.auc(y, s) == pytest.approx(_auc_by_pairs(y, s))


def test_log_loss(ads_data: ModuleType) -> None:
    assert ads_data.log_loss(np.array([1, 0]), np.array([0.5, 0.5])) == pytest.approx(
        np.log(2)
    )
    assert np.isfinite(ads_data.log_loss(np.array([1, 0]), np.array([0.0, 1.0])))


def test_rows_do_not_depend_on_how_they_are_split(ads_data: ModuleType) -> None:
    ids = np.arange(1000)
    whole = ads_data.features(7, "train", ids)
    parts = np.concatenate(
        [ads_data.features(7, "train", ids[i : i + 137]) for i in range(0, 1000, 137)]
    )
    np.testing.assert_array_equal(whole, parts)

    x0, y0 = ads_data.shard(7, "train", 1000, 4, 0)
    np.testing.assert_array_equal(x0, whole[0::4])
    np.testing.assert_array_equal(
        y0, ads_data.clicks(7, "train", ids[0::4], whole[0::4])
    )


def test_seeds_and_splits_differ(ads_data: ModuleType) -> None:
    ids = np.arange(100)
    base = ads_data.features(7, "train", ids)
    assert not np.array_equal(base, ads_data.features(8, "train", ids))
    assert not np.array_equal(base, ads_data.features(7, "eval", ids))
    assert abs(float(base.mean())) < 0.2 and 0.8 < float(base.std()) < 1.2


def test_model_round_trip(ads_data: ModuleType, tmp_path: Path) -> None:
    model = ads_data.Model(
        weights=np.linspace(-1, 1, len(ads_data.FEATURES)), bias=-1.5, info={"seed": 7}
    )
    ads_data.save_model(model, tmp_path)
    loaded = ads_data.load_model(tmp_path)
    np.testing.assert_array_equal(loaded.weights, model.weights)
    assert loaded.bias == model.bias
    assert loaded.version == model.version
    assert loaded.info["version"] == model.version
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.json", "model.npz"]


def test_missing_model_says_what_to_do(ads_data: ModuleType, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="run train.py first"):
        ads_data.load_model(tmp_path)


@pytest.mark.parametrize(
    ("key", "want"),
    [
        pytest.param(None, None, id="unset"),
        pytest.param("", None, id="empty"),
        pytest.param("2026-11-30", "2026-11-30", id="day"),
    ],
)
def test_partition_day(
    ads_data: ModuleType,
    monkeypatch: pytest.MonkeyPatch,
    key: str | None,
    want: str | None,
) -> None:
    if key is None:
        monkeypatch.delenv("RAYSTEP_PARTITION_KEY", raising=False)
    else:
        monkeypatch.setenv("RAYSTEP_PARTITION_KEY", key)
    assert ads_data.partition_day() == want


@pytest.mark.parametrize(
    "key", ["2026-11", "2026-11-31", "20261130", "2026-11-30-00:00", "eu"]
)
def test_partition_day_refuses_what_is_not_a_day(
    ads_data: ModuleType, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    monkeypatch.setenv("RAYSTEP_PARTITION_KEY", key)
    with pytest.raises(
        ValueError, match=rf"RAYSTEP_PARTITION_KEY='{key}': expected .*YYYY-MM-DD"
    ):
        ads_data.partition_day()


def test_day_seed_differs_by_day_and_repeats_for_a_day(ads_data: ModuleType) -> None:
    assert ads_data.day_seed(7, None) == 7
    days = [f"2026-11-{d:02d}" for d in range(1, 31)]
    seeds = [ads_data.day_seed(7, day) for day in days]
    assert len(set(seeds)) == len(days)
    assert seeds == [ads_data.day_seed(7, day) for day in days]
    assert ads_data.day_seed(8, days[0]) != seeds[0]
    assert all(0 <= s < 2**32 for s in seeds)
    a, b = ads_data.day_seed(7, days[0]), ads_data.day_seed(7, days[1])
    assert not np.array_equal(
        ads_data.features(a, "train", np.arange(100)),
        ads_data.features(b, "train", np.arange(100)),
    ), "two days draw different rows"


def test_day_dirs(
    ads_data: ModuleType, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ADS_MODEL_DIR", str(tmp_path / "m"))
    assert ads_data.model_dir() == tmp_path / "m"
    assert ads_data.model_dir("2026-11-30") == tmp_path / "m" / "2026-11-30"
    assert ads_data.day_dir(tmp_path, None) == tmp_path
    assert ads_data.day_metadata(None) == {}
    assert ads_data.day_metadata("2026-11-30") == {"day": "2026-11-30"}
