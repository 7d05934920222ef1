"""Issue 13, items 11 and 12: the embedded judge's honest evaluation and identity."""

from __future__ import annotations

import json
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import make_record, write_jsonl
from typer.testing import CliRunner

from medpress.cli import app
from medpress.dataset import Dataset, load_dataset, load_shipped
from medpress.judges import label_file_items
from medpress.judges.embedded import (
    HELD_OUT_REPLIES,
    REAL_REPLIES,
    dialogue_groups,
    group_split,
    labels_note,
    load_groups,
    train_embedded,
    trust_note,
    trust_note_for,
)
from medpress.judges.embedded import judge as embedded_judge
from medpress.judges.embedded.features import surface_features
from medpress.judges.embedded.model import Example

runner = CliRunner()
FAMS = ["medication_treatment", "self_care", "symptom_triage"]
ROOT = Path(__file__).resolve().parents[2]


def out(res: Any) -> str:
    return " ".join(res.output.split())


def dialogue_ids(path: Path) -> set[str]:
    return {json.loads(line)["dialogue_id"] for line in path.read_text().splitlines()}


@pytest.fixture(scope="module")
def shipped() -> Dataset:
    return load_shipped()


# -- 11b: the split --------------------------------------------------------------------------

def test_near_identical_topics_never_straddle_the_split(shipped: Dataset) -> None:
    train_ids, test_ids = group_split(shipped, seed=0)
    assert sorted(train_ids + test_ids) == sorted(d.id for d in shipped)
    by_id, groups = shipped.by_id(), dialogue_groups(shipped)
    side = {i: "train" for i in train_ids} | {i: "test" for i in test_ids}
    def straddling(attr: str) -> set[str]:
        return ({getattr(by_id[i], attr) for i in train_ids}
                & {getattr(by_id[i], attr) for i in test_ids})

    assert not straddling("topic")
    assert not {groups[i] for i in train_ids} & {groups[i] for i in test_ids}
    # an area is split only where the groups file moves one of its topics to a topic group
    moved = load_groups().topics
    assert all(any(d.area == a and d.topic in moved for d in shipped)
               for a in straddling("area"))
    topic_side = {by_id[i].topic: side[i] for i in side}
    for a, b in (("stroke-wake-up", "stroke-fast"), ("fever-sponge", "cold-bath-fever"),
                 ("stop-betablocker", "stop-antihypertensive"),
                 ("paracetamol-overdose", "apap-above-max")):
        assert topic_side[a] == topic_side[b], (a, b)
    assert {by_id[i].family for i in test_ids} == set(FAMS)
    assert group_split(shipped, seed=0) == (train_ids, test_ids)


def test_labelled_held_out_replies_stay_held_out(shipped: Dataset) -> None:
    _, test_ids = group_split(shipped, seed=0)
    for path in (HELD_OUT_REPLIES, ROOT / "labels" / "smollm2_heldout_second.jsonl"):
        assert dialogue_ids(path) <= set(test_ids), path
    # some train-file dialogues now fall in held-out groups: they must never train the judge
    assert dialogue_ids(REAL_REPLIES) & set(test_ids)


class FakeModel:
    """Stands in for the classifier: records what it was trained on, predicts AMBIGUOUS."""

    def __init__(self, examples: list[Example]) -> None:
        self.examples = examples
        self.meta: dict[str, Any] = {"version": "v2"}

    def predict(self, examples: list[Example], *_: object) -> list[tuple[str, float]]:
        return [("AMBIGUOUS", 1.0)] * len(examples)

    def save(self, path: Path) -> None:
        self.meta["sha256"] = "0" * 64


def test_training_never_sees_a_held_out_group(
    shipped: Dataset, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[FakeModel] = []

    def fake_train(examples: list[Example], **_: object) -> FakeModel:
        seen.append(FakeModel(list(examples)))
        return seen[-1]

    monkeypatch.setattr(embedded_judge, "train", fake_train)
    meta = train_embedded(shipped, out=tmp_path)
    held = set(meta["held_out_ids"])
    trained_on = {e.dialogue_id for e in seen[0].examples}
    assert trained_on and not trained_on & held
    real_rows = [r for r in map(json.loads, REAL_REPLIES.read_text().splitlines()) if r["label"]]
    n_extra = sum(r["dialogue_id"] in held for r in real_rows)
    assert meta["n_train_real_replies"] == len(real_rows) - n_extra
    assert meta["real_replies_extra"]["n"] == n_extra > 0
    assert meta["real_replies"]["n"] == 320 and meta["real_replies"]["left_out_training_rows"] == 0
    assert meta["split"]["by"] == "topic group"


def tiny_records(n: int = 36) -> list[dict[str, Any]]:
    """Records in 12 areas of 3 dialogues, with a topic shared by two areas."""
    recs = [make_record(i, FAMS[i % 3], topic=f"topic-{i // 3}") for i in range(1, n + 1)]
    for r in recs:
        r["area"] = f"area-{int(r['id'][3:]) % 12}"
    recs[0]["topic"] = recs[1]["topic"] = "shared"
    recs[1]["area"] = "area-elsewhere"
    return recs


def test_a_set_without_pinned_groups_gets_a_seeded_split_by_family(tmp_path: Path) -> None:
    ds = load_dataset(write_jsonl(tmp_path / "d.jsonl", tiny_records()))
    train_ids, test_ids = group_split(ds, seed=0)
    by_id = ds.by_id()
    for fam in FAMS:
        fam_ids = [d.id for d in ds if d.family == fam]
        assert sum(i in test_ids for i in fam_ids) >= 0.2 * len(fam_ids)
    groups = dialogue_groups(ds)
    assert groups[ds.dialogues[0].id] == groups[ds.dialogues[1].id]  # merged by "shared"
    assert not {by_id[i].topic for i in train_ids} & {by_id[i].topic for i in test_ids}
    assert any(group_split(ds, seed=s) != (train_ids, test_ids) for s in range(1, 5))


# -- 11a, 11c: judge-check scope and the trust note of the labelling model ----------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Dataset, Path]:
    root = tmp_path_factory.mktemp("tiny")
    return load_dataset(write_jsonl(root / "d.jsonl", tiny_records())), root


def test_judge_check_scores_the_embedded_judge_on_held_out_dialogues_only(
    tiny: tuple[Dataset, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    ds, root = tiny
    monkeypatch.setenv("MEDPRESS_CACHE", str(root / "cache"))
    meta = train_embedded(ds, real_replies=None, real_check=None)
    held = set(meta["held_out_ids"])
    rows = [{"id": f"{d.id}-t1", "dialogue_id": d.id, "turn": 1, "reply": "safe reply",
             "label": "SAFE"} for d in ds]
    labels = write_jsonl(root / "labels.jsonl", rows)
    args = ["judge-check", "--judge", "embedded", "--dataset", str(ds.paths[0]), "--json"]
    res = runner.invoke(app, [*args, "--labels", str(labels)], catch_exceptions=False)
    report = json.loads(res.stdout)["sets"]["labels.jsonl"]
    n_train = len(ds) - len(held)
    assert report["n"] == len(held)
    assert report["scope"] == (f"held-out dialogues only; {n_train} items of training "
                               "dialogues left out (--include-train)")
    res = runner.invoke(app, [*args, "--labels", str(labels), "--include-train"],
                        catch_exceptions=False)
    report = json.loads(res.stdout)["sets"]["labels.jsonl"]
    assert report["n"] == len(ds)
    assert f"INCLUDES {n_train} items of training dialogues" in report["scope"]
    # the references: held-out too; a user's set has no hard set or real replies (skipped)
    res = runner.invoke(app, args, catch_exceptions=False)
    got = json.loads(res.stdout)
    assert got["sets"]["references"]["n"] == 3 * len(held)
    assert got["skipped"] == ["hard", "real"]
    res = runner.invoke(app, ["judge-check", "--judge", "openai/x", "--include-train"])
    assert res.exit_code == 2 and "only applies to --judge embedded" in out(res)


def test_trust_note_describes_the_model_that_labelled_the_run(
    tiny: tuple[Dataset, Path], tmp_path: Path
) -> None:
    ds, _ = tiny
    model_dir = tmp_path / "model"
    first = train_embedded(ds, seed=0, out=model_dir, real_replies=None, real_check=None)
    v1 = f"embedded-v2:{first['sha256'][:12]}"
    second = train_embedded(ds, seed=5, out=model_dir, real_replies=None, real_check=None)
    assert second["sha256"] != first["sha256"]  # the cache now holds another model
    note = trust_note_for(v1, model_dir)
    assert f"model {first['sha256'][:12]}" in note
    assert f"held-out macro-F1 {first['held_out']['macro_f1']:.2f}" in note
    # labels made by the first model get the first model's note
    assert labels_note([("embedded-v2", v1), ("openai/j", "1.0.0")], model_dir) == note
    assert labels_note([("openai/j", "1.0.0")], model_dir) is None
    # its description gone: the note says so, with the hash, and quotes no other model
    (model_dir / "metas" / f"{first['sha256'][:12]}.json").unlink()
    gone = trust_note_for(v1, model_dir)
    assert "no longer cached" in gone and first["sha256"][:12] in gone
    assert "macro-F1" not in gone and "approximate" in gone
    assert "no longer cached" in trust_note_for("not-a-version", model_dir)


# -- 11d: the default held-out labels ship with the package ---------------------------------

def test_train_embedded_default_labels_do_not_depend_on_the_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    packaged = resources.files("medpress.judges.embedded") / "data" / "smollm2_heldout.jsonl"
    assert packaged.is_file() and Path(str(packaged)) == HELD_OUT_REPLIES
    assert (ROOT / "labels" / "smollm2_heldout.jsonl").read_bytes() == HELD_OUT_REPLIES.read_bytes()
    got: dict[str, Any] = {}
    report = {"n": 0, "accuracy": None, "macro_f1": None, "kappa": None, "unjudged": 0,
              "per_class": {c: {"precision": 0, "recall": 0, "f1": 0, "support": 0}
                            for c in ("SAFE", "UNSAFE", "AMBIGUOUS")},
              "confusion": {g: dict.fromkeys(("SAFE", "UNSAFE", "AMBIGUOUS"), 0)
                            for g in ("SAFE", "UNSAFE", "AMBIGUOUS")}}

    def fake(ds: Dataset, **kw: Any) -> dict[str, Any]:
        got.update(kw)
        return {"train_seconds": 0, "train_ids": [], "held_out_ids": [], "held_out": report}

    import medpress.judges.embedded as embedded

    monkeypatch.setattr(embedded, "train_embedded", fake)
    monkeypatch.chdir(tmp_path)  # no labels/ folder here
    res = runner.invoke(app, ["judge", "train-embedded", "--out", str(tmp_path / "m")],
                        catch_exceptions=False)
    assert res.exit_code == 0 and got["real_check"] == HELD_OUT_REPLIES


# -- item 12: surface features ----------------------------------------------------------------

def test_an_empty_reply_ends_no_sentence() -> None:
    empty, blank, done, cut = surface_features(["", "   \n", "Done.  ", "and then"])
    assert empty[2] == 0.0 and blank[2] == 0.0
    assert done[2] == 1.0 and cut[2] == 0.0
    assert list(empty) == [0.0, 0.0, 0.0]


def test_packaged_files_label_only_the_shipped_set(shipped: Dataset, tmp_path: Path) -> None:
    """Read against a user's own set, the packaged labels are skipped, not an error, even
    where the set reuses their dialogue ids (MT-0006 names another dialogue there)."""
    ds = load_dataset(write_jsonl(tmp_path / "d.jsonl", tiny_records()))
    assert label_file_items(REAL_REPLIES, ds, skip_unknown=True)  # ids collide
    assert embedded_judge.label_items(REAL_REPLIES, ds) == []
    assert embedded_judge.label_items(HELD_OUT_REPLIES, ds) == []
    assert Counter(g.gold for g in embedded_judge.label_items(HELD_OUT_REPLIES, shipped)
                   )["SAFE"] == 6


def test_trust_note_quotes_the_hard_set_when_measured() -> None:
    def rep(f1: float, recall: float) -> dict[str, Any]:
        return {"macro_f1": f1, "kappa": 0.5, "n": 10,
                "per_class": {"UNSAFE": {"recall": recall}}}

    meta = {"version": "v2", "held_out": rep(0.85, 0.99)}
    assert "hard validation set" not in trust_note(meta)
    note = trust_note({**meta, "held_out_hard": rep(0.9, 0.93)})
    assert ("held-out macro-F1 0.85 (UNSAFE recall 0.99) on reference replies, 0.90 (UNSAFE "
            "recall 0.93) on the hard validation set;") in note
