"""Gold samples: a seeded random sample of a run's dialogues for people to label.

Dialogue-level metrics need whole dialogues, so the unit drawn is a (condition, dialogue):
every repeat and every turn of it goes on the sheet. A sample may be stratified by condition
and/or family: each stratum gets a share of ``n`` proportional to its size (at least two
dialogues where it has them, so its variance can be estimated), drawn without replacement.
The design (seed, strata, the units drawn and each stratum's size) is stored in the run
(``label_samples`` in its meta), so the corrected metrics (:mod:`medpress.metrics.corrected`)
know which dialogues were drawn, including any left unlabelled.
"""

from __future__ import annotations

import csv
import json
import random
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from medpress.dataset import Dataset
from medpress.store import RunStore

META_KEY = "label_samples"
STRATA_FIELDS: tuple[str, ...] = ("condition", "family")
MIN_PER_STRATUM = 2
SHEET_COLUMNS: tuple[str, ...] = (
    "id", "model", "condition", "repeat", "dialogue_id", "family", "turn", "pressure",
    "unsafe_belief", "safe_stance", "urgency", "user", "reply", "conversation", "judge_label",
    "label", "failure_mode",
)
Unit = tuple[str, str]  # (condition, dialogue_id)


@dataclass(frozen=True)
class SampleDesign:
    """One drawn sample: how it was drawn and what it holds."""

    id: str
    seed: int
    n: int
    by: tuple[str, ...]
    units: tuple[Unit, ...]
    strata: dict[str, str]  # "condition|dialogue_id" -> stratum name ("" when not stratified)
    stratum_sizes: dict[str, int]  # stratum -> units in the run
    created: float

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["units"] = [list(u) for u in self.units]
        d["by"] = list(self.by)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SampleDesign:
        return cls(str(d["id"]), int(d["seed"]), int(d["n"]), tuple(d["by"]),
                   tuple((str(c), str(i)) for c, i in d["units"]), dict(d["strata"]),
                   {str(k): int(v) for k, v in d["stratum_sizes"].items()}, float(d["created"]))

    def stratum_of(self, unit: Unit) -> str:
        return self.strata.get(f"{unit[0]}|{unit[1]}", "")


def designs(store: RunStore) -> list[SampleDesign]:
    """The samples drawn from a run, oldest first."""
    return [SampleDesign.from_dict(d) for d in store.get_meta(META_KEY) or []]


def draw_sample(store: RunStore, ds: Dataset, n: int, *, seed: int = 0,
                by: Sequence[str] = ()) -> SampleDesign:
    """Draw ``n`` (condition, dialogue) units of the run's generated dialogues and store the
    design in the run. Deterministic for a run, ``n``, ``seed`` and ``by``: drawing the same
    sample again returns the stored design instead of recording a second one.

    Raises:
        ValueError: ``n`` < 1 or more than the run has, an unknown ``by`` field, or a run
            with nothing generated.
    """
    bad = [b for b in by if b not in STRATA_FIELDS]
    if bad:
        raise ValueError(f"--by: unknown field {bad[0]!r} (choose from "
                         f"{', '.join(STRATA_FIELDS)})")
    family = {d.id: d.family for d in ds}
    units = sorted({(c, d) for c, _, d in store.unit_states()})
    if not units:
        raise ValueError(f"{store.run_dir}: nothing generated yet to sample from")
    if not 1 <= n <= len(units):
        raise ValueError(f"-n must be 1..{len(units)} (the run's condition x dialogue units)")
    groups: dict[str, list[Unit]] = defaultdict(list)
    for u in units:
        key = {"condition": u[0], "family": family.get(u[1], "?")}
        groups["|".join(key[b] for b in by)].append(u)
    quota = _allocate({k: len(v) for k, v in groups.items()}, n)
    rng = random.Random(f"{seed}:{n}:{','.join(by)}")
    drawn: list[Unit] = []
    for stratum in sorted(groups):
        drawn.extend(rng.sample(groups[stratum], quota[stratum]))
    previous = designs(store)
    for old in previous:  # the same draw again: the same design, not a new record
        if (old.seed, old.n, old.by, old.units) == (seed, n, tuple(by), tuple(sorted(drawn))):
            return old
    design = SampleDesign(f"s{len(previous) + 1}", seed, n, tuple(by), tuple(sorted(drawn)),
                          {f"{c}|{d}": s for s, us in groups.items() for c, d in us},
                          {k: len(v) for k, v in groups.items()}, time.time())
    store.set_meta(META_KEY, [*(p.to_dict() for p in previous), design.to_dict()])
    return design


def _allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Proportional allocation of ``n`` over strata (largest remainders); then each stratum is
    raised to ``MIN_PER_STRATUM`` (or its size) where ``n`` allows, taken from the largest."""
    total = sum(sizes.values())
    share = {k: v * n / total for k, v in sizes.items()}
    out = {k: int(share[k]) for k in sizes}
    for k in sorted(sizes, key=lambda k: (-(share[k] - int(share[k])), k)):
        if sum(out.values()) == n:
            break
        out[k] += 1
    for k in sorted(sizes, key=lambda k: sizes[k]):
        need = min(MIN_PER_STRATUM, sizes[k]) - out[k]
        while need > 0:
            donor = max((d for d in out if out[d] > min(MIN_PER_STRATUM, sizes[d])),
                        key=lambda d: (out[d], d), default=None)
            if donor is None:
                break
            out[donor] -= 1
            out[k] += 1
            need -= 1
    return out


def write_sheet(store: RunStore, ds: Dataset, design: SampleDesign, out: Path,
                judge_labels: dict[tuple[str, int, str, int], str | None] | None = None
                ) -> tuple[Path, Path]:
    """Write the labelling sheet as ``out``.jsonl and ``out``.csv: one row per turn of the
    sample, in conversation order, with the card, the user turn and the reply; ``label`` and
    ``failure_mode`` blank to fill in. ``judge_labels`` fills ``judge_label`` (hidden by
    default, so a labeller works blind)."""
    cards = ds.by_id()
    chosen = set(design.units)
    model = str((store.get_meta("model") or {}).get("spec", ""))
    rows = []
    for t in store.iter_turns():
        if (t["condition"], t["dialogue_id"]) not in chosen or t.get("error"):
            continue
        d = cards.get(t["dialogue_id"])
        conv = f"{t['condition']}:{t['repeat']}:{t['dialogue_id']}"
        key = (t["condition"], t["repeat"], t["dialogue_id"], t["turn"])
        rows.append({
            "id": f"{conv}:t{t['turn']}", "model": model, "condition": t["condition"],
            "repeat": t["repeat"], "dialogue_id": t["dialogue_id"], "family": t["family"],
            "turn": t["turn"], "pressure": t["pressure"],
            "unsafe_belief": d.unsafe_belief if d else "", "safe_stance": d.safe_stance if d
            else "", "urgency": d.urgency if d else "", "user": t["user"], "reply": t["reply"],
            "conversation": conv,
            "judge_label": (judge_labels or {}).get(key) if judge_labels is not None else None,
            "label": None, "failure_mode": None,
        })
    jsonl, csv_path = out.with_suffix(".jsonl"), out.with_suffix(".csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    with jsonl.open("w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")
    with csv_path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=SHEET_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return jsonl, csv_path
