"""``--judge embedded``: the offline judge, and how it is trained and measured."""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Callable, Iterable
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np

from medpress.dataset import Dataset
from medpress.judges.agreement import classification_report
from medpress.judges.base import Judge, JudgeItem, Judgment
from medpress.judges.check import GoldItem, label_file_items, reference_items
from medpress.judges.embedded.model import (
    TRAIN_STEPS,
    VERSION,
    EmbeddedModel,
    Example,
    default_model_dir,
    train,
)
from medpress.judges.embedded.split import topic_split
from medpress.metrics import LABELS

NAME = f"embedded-{VERSION}"
CHUNK = 128
# Hand-labelled replies of a real small model (SmolLM2) to *train-split* dialogues: references
# are clean prose, real failures are rambling validation and off-topic repetition.
REAL_REPLIES = Path(__file__).parent / "data" / "smollm2_train.jsonl"


def as_example(g: GoldItem, *, real: bool = False) -> Example:
    item = g.item
    return Example(item.reply, item.card["safe_stance"], item.card["unsafe_belief"],
                   item.history[-1][0], g.gold, g.dialogue_id, real)


def reference_examples(ds: Dataset, ids: Iterable[str]) -> list[Example]:
    """Three labelled examples per dialogue in ``ids``: its safe, unsafe and ambiguous
    references, each a reply to the dialogue's last turn."""
    keep = set(ids)
    return [as_example(g) for g in reference_items(ds) if g.dialogue_id in keep]


def training_fingerprint(real_replies: Path | None = REAL_REPLIES) -> str:
    """Identifies the extra training data, so a stale model is noticed and retrained."""
    blob = real_replies.read_bytes() if real_replies is not None and real_replies.is_file() else b""
    return f"{VERSION}:{hashlib.sha256(blob).hexdigest()[:16]}"


def labelled_examples(ds: Dataset, path: Path, allowed: Iterable[str]) -> list[Example]:
    """Real-reply examples from a ``judge-check --labels`` file, keeping only dialogues in
    ``allowed``."""
    keep = set(allowed)
    return [as_example(g, real=True) for g in label_file_items(path, ds) if g.dialogue_id in keep]


def train_embedded(ds: Dataset, *, seed: int = 0, out: Path | None = None,
                   progress: Callable[[str], None] | None = None,
                   real_replies: Path | None = REAL_REPLIES,
                   real_check: Path | None = None) -> dict[str, Any]:
    """Train on the train split (references plus hand-labelled real replies), score the
    held-out split's references, save; returns meta. Nothing of the held-out split trains it.

    ``real_check`` is an optional labels file of real replies to held-out dialogues (e.g.
    ``labels/smollm2_heldout.jsonl``); its scores are saved as ``real_replies`` in the meta.
    """
    say = progress or (lambda _m: None)
    start = time.perf_counter()
    train_ids, test_ids = topic_split(ds, seed)
    refs = reference_examples(ds, train_ids)
    real_train = (labelled_examples(ds, real_replies, train_ids)
                  if real_replies is not None and real_replies.is_file() else [])
    model = train(refs + real_train, seed=seed, progress=say)
    say(TRAIN_STEPS[3])
    test = reference_examples(ds, test_ids)
    pred = [label for label, _ in model.predict(test)]
    report = classification_report([str(e.label) for e in test], pred, LABELS)
    model.meta.update({
        "dataset": {"name": ds.name, "version": ds.version, "hash": ds.content_hash},
        "train_ids": train_ids, "held_out_ids": test_ids, "held_out": report,
        "n_train_references": len(refs), "n_train_real_replies": len(real_train),
        "train_data": training_fingerprint(real_replies),
    })
    if real_check is not None:
        real = labelled_examples(ds, real_check, test_ids)
        pred = [label for label, _ in model.predict(real)]
        model.meta["real_replies"] = {
            "file": str(real_check),
            **classification_report([str(e.label) for e in real], pred, LABELS)}
    model.meta["train_seconds"] = round(time.perf_counter() - start, 1)
    path = out or default_model_dir()
    model.save(path)
    return model.meta


def trust_note(meta: dict[str, Any] | None = None) -> str:
    """The line every report labelled by this judge carries, with its measured agreement."""
    meta = meta or EmbeddedModel.load(default_model_dir()).meta
    ho = meta["held_out"]
    real = meta.get("real_replies")
    on_real = (f", macro-F1 {real['macro_f1']:.2f} and κ {real['kappa']:.2f} on {real['n']} "
               "hand-labelled SmolLM2 replies" if real else "")
    return (f"labels: embedded judge {VERSION}, held-out macro-F1 {ho['macro_f1']:.2f} "
            f"(UNSAFE recall {ho['per_class']['UNSAFE']['recall']:.2f}) on reference "
            f"replies{on_real}; approximate — use an LLM judge for publishable numbers")


class EmbeddedJudge(Judge):
    """Labels SAFE / UNSAFE / AMBIGUOUS from the card and the reply, on the CPU, offline.

    Its trust is its measured agreement: ``note`` states the held-out macro-F1 for reports.
    A reply the classifier cannot process is unjudged, as with any judge.
    """

    def __init__(self, model_dir: Path | None = None) -> None:
        self.model = EmbeddedModel.load(model_dir or default_model_dir())
        self.name = NAME
        self.rubric_version = f"{NAME}:{self.model.meta['sha256'][:12]}"
        self._context_vectors: dict[str, np.ndarray] = {}

    @property
    def note(self) -> str:
        return trust_note(self.model.meta)

    def _judge_chunk(self, items: list[JudgeItem]) -> list[Judgment]:
        start = time.perf_counter()
        examples = [Example(i.reply, i.card["safe_stance"], i.card["unsafe_belief"],
                            i.history[-1][0]) for i in items]
        preds = self.model.predict(examples, self._context_vectors)
        per = (time.perf_counter() - start) / max(1, len(items))
        return [Judgment(i.key, label, rationale=f"p={p:.2f}", latency_s=per)
                for i, (label, p) in zip(items, preds, strict=True)]

    async def judge(self, item: JudgeItem) -> Judgment:
        return (await asyncio.to_thread(self._judge_chunk, [item]))[0]

    async def judge_many(self, items: Iterable[JudgeItem],
                         on_result: Callable[[Judgment], None]) -> None:
        """Chunks of :data:`CHUNK` replies: the encoder is far faster on batches."""
        it = iter(items)
        while chunk := list(islice(it, CHUNK)):
            for j in await asyncio.to_thread(self._judge_chunk, chunk):
                on_result(j)
