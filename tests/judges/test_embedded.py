"""The embedded judge: a reproducible split and training, and its measured held-out quality."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from medpress.dataset import Dataset, load_shipped
from medpress.judges import classification_report
from medpress.judges.embedded import (
    EmbeddedModel,
    reference_examples,
    topic_split,
    train_embedded,
)
from medpress.judges.embedded.model import train
from medpress.metrics import LABELS


@pytest.fixture(scope="module")
def shipped() -> Dataset:
    return load_shipped()


@pytest.fixture(scope="module")
def trained(shipped: Dataset, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    out = tmp_path_factory.mktemp("ej")
    return out, train_embedded(shipped, seed=0, out=out)


def test_split_holds_out_whole_topics_per_family(shipped: Dataset) -> None:
    train_ids, test_ids = topic_split(shipped, seed=0)
    by_id = shipped.by_id()
    assert not set(train_ids) & set(test_ids)
    assert len(train_ids) + len(test_ids) == len(shipped)
    assert not {by_id[i].topic for i in train_ids} & {by_id[i].topic for i in test_ids}
    fams = Counter(by_id[i].family for i in test_ids)
    assert set(fams) == {"medication_treatment", "self_care", "symptom_triage"}
    assert topic_split(shipped, seed=0) == (train_ids, test_ids)
    assert topic_split(shipped, seed=1) != (train_ids, test_ids)


def test_training_is_deterministic_under_a_seed(shipped: Dataset) -> None:
    tiny = reference_examples(shipped, [d.id for d in shipped][::12])
    a, b = train(tiny, seed=3), train(tiny, seed=3)
    assert np.array_equal(a.clf.coef_, b.clf.coef_)
    assert a.unsafe_threshold == b.unsafe_threshold


def test_held_out_quality_meets_targets_and_beats_majority(trained: tuple[Path, dict]) -> None:  # type: ignore[type-arg]
    path, meta = trained
    ho = meta["held_out"]
    assert ho["macro_f1"] >= 0.85
    assert ho["per_class"]["UNSAFE"]["recall"] >= 0.90
    # Majority-class baseline: the three classes are balanced, so it scores 1/3 accuracy.
    gold = [lab for lab in LABELS for _ in range(ho["per_class"][lab]["support"])]
    majority = Counter(gold).most_common(1)[0][0]
    base = classification_report(gold, [majority] * len(gold), LABELS)
    assert ho["macro_f1"] - base["macro_f1"] >= 0.5
    assert ho["accuracy"] >= base["accuracy"] + 0.5
    # the saved model reproduces the held-out score
    model = EmbeddedModel.load(path)
    test = reference_examples(load_shipped(), meta["held_out_ids"])
    pred = [lab for lab, _ in model.predict(test)]
    again = classification_report([str(e.label) for e in test], pred, LABELS)
    assert again["macro_f1"] == pytest.approx(ho["macro_f1"])


def test_tampered_model_is_refused(trained: tuple[Path, dict], tmp_path: Path) -> None:  # type: ignore[type-arg]
    path, _ = trained
    bad = tmp_path / "m"
    bad.mkdir()
    (bad / "model.pkl").write_bytes((path / "model.pkl").read_bytes() + b"x")
    (bad / "meta.json").write_text((path / "meta.json").read_text())
    with pytest.raises(FileNotFoundError, match="does not match"):
        EmbeddedModel.load(bad)
