"""What ``judge-check`` scores a judge on, and how its figures are printed."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich import box
from rich.table import Table

from medpress.cli.common import console
from medpress.dataset import Dataset, is_shipped, load_shipped_hard_set
from medpress.judges import GoldItem, hard_set_items, label_file_items, reference_items
from medpress.judges.rubric import load_rubric
from medpress.suites import Suite

MOVED_NOTE = "moved from the references: the softest UNSAFE replies in the set"
# The sets judge-check scores by default, in the order it prints them.
SETS: dict[str, str] = {
    "references": "the dataset's references (safe / unsafe / ambiguous reply to the last turn)",
    "hard": "the hard judge-validation set (caveated permission, urgency downgrades, long "
            "hedges, short safe replies … at turns 2-5)",
    "real": "hand-labelled replies of a real model (SmolLM2-135M), packaged",
}


def suite_references(suite: Suite) -> tuple[dict[str, str], str, list[str]]:
    """A suite's known labels for ``judge-check``: its manifest's ``references`` (kind ->
    label), the kind placed as the earlier replies (the one labelled with the rubric's last,
    least severe label: a model that held firm), and the rubric's labels, most severe first.

    Raises:
        ValueError: a reference label the rubric lacks, or no reference with its last label.
    """
    labels = list(load_rubric(suite.rubric_path).labels)
    refs = dict(suite.manifest.references)
    if unknown := sorted(set(refs.values()) - set(labels)):
        raise ValueError(f"suite {suite.name!r}: references: {unknown} not among its rubric's "
                         f"labels {labels}")
    held = next((k for k, v in refs.items() if v == labels[-1]), None)
    if held is None:
        raise ValueError(f"suite {suite.name!r}: judge-check needs a reference labelled "
                         f"{labels[-1]} (its earlier turns' replies); references: {refs}")
    return refs, held, labels


def validation_sets(ds: Dataset, names: Sequence[str], suite: Suite | None = None
                    ) -> dict[str, list[GoldItem]]:
    """Gold items of each named set (keys of :data:`SETS`). ``hard`` and ``real`` label the
    shipped set's dialogues: for any other set (:func:`~medpress.dataset.is_shipped`) they
    are empty.

    ``real`` reads both packaged SmolLM2 files (the held-out one first; a row id in both is
    taken once). A ``suite`` other than MedPRESS has only its ``references`` (labelled by
    its manifest, :func:`suite_references`); ``hard`` or ``real`` is then an error.
    """
    if suite is not None and not suite.is_default:
        if other := [n for n in names if n != "references"]:
            raise ValueError(f"--set {other[0]}: the {other[0]} set labels MedPRESS dialogues; "
                             f"suite {suite.name!r} is checked on its references only")
        refs, held, _ = suite_references(suite)
        return {"references": reference_items(ds, refs, held)}
    out: dict[str, list[GoldItem]] = {}
    for name in names:
        if name not in SETS:
            raise ValueError(f"--set: unknown set {name!r} (known: {', '.join(SETS)})")
        if name == "references":
            out[name] = reference_items(ds)
        elif not is_shipped(ds):
            out[name] = []
        elif name == "hard":
            out[name] = hard_set_items(ds, load_shipped_hard_set().rows)
        else:
            from medpress.judges.embedded import HELD_OUT_REPLIES, REAL_REPLIES

            seen: set[object] = set()
            items = []
            for path in (HELD_OUT_REPLIES, REAL_REPLIES):
                for g in label_file_items(path, ds, skip_unknown=True):
                    if g.item.key not in seen:
                        seen.add(g.item.key)
                        items.append(g)
            out[name] = items
    return out


def embedded_scope(gold: list[GoldItem], held_out: list[str], include_train: bool
                   ) -> tuple[list[GoldItem], str]:
    """The items the embedded judge is scored on, and a phrase saying which they are.

    Held-out dialogues only, unless ``include_train``: then all, marked as including training
    dialogues (training fit is not a held-out figure). An item of a dialogue the split does not
    know (a user's set) counts as training. An empty list when no item is held out.
    """
    held = set(held_out)
    n_train = sum(g.dialogue_id not in held for g in gold)
    if include_train:
        return gold, (f"INCLUDES {n_train} items of training dialogues: not a held-out figure"
                      if n_train else "held-out dialogues only")
    kept = [g for g in gold if g.dialogue_id in held]
    return kept, ("held-out dialogues only" + (f"; {n_train} items of training dialogues left "
                                               "out (--include-train)" if n_train else ""))


def embedded_held_out(ds: Dataset, include_train: bool = False) -> list[str]:
    """The embedded judge's held-out ids: it is only ever scored on dialogues it never saw.

    For a dataset the cached model was not trained on, no id is known to be held out: that
    is an error, unless ``include_train`` (then every item counts as training).

    Raises:
        ValueError: for another dataset without ``include_train``.
    """
    from medpress.judges.embedded import EmbeddedModel, default_model_dir

    meta = EmbeddedModel.load(default_model_dir()).meta
    if meta["dataset"]["hash"] != ds.content_hash:
        if include_train:
            return []
        raise ValueError("the embedded judge was trained on another version of this dataset, "
                         "so its held-out dialogues are unknown; retrain it (medpress judge "
                         "train-embedded --dataset …) or score everything with --include-train")
    return list(meta["held_out_ids"])


def _f(x: object) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def print_check(report: dict[str, Any]) -> None:
    """One agreement report: headline scores, per-class table, confusion, and per kind of
    hard case when the report has them; over the labels the report was made with."""
    labels = list(report["per_class"])  # the report's own labels: MedPRESS's or a suite's
    console.print(f"[bold]{report['judge']}[/]: n={report['n']}  accuracy "
                  f"{_f(report['accuracy'])}  macro-F1 {_f(report['macro_f1'])}  "
                  f"κ {_f(report['kappa'])}  unjudged {report['unjudged']}")
    table = Table(title="per class")
    for col in ("class", "precision", "recall", "F1", "support"):
        table.add_column(col, justify="right")
    for c in labels:
        p = report["per_class"][c]
        table.add_row(c, _f(p["precision"]), _f(p["recall"]), _f(p["f1"]), str(p["support"]))
    console.print(table)
    conf = Table(title="confusion (rows gold, columns predicted)")
    conf.add_column("gold")
    for c in labels:
        conf.add_column(c, justify="right")
    for g in labels:
        conf.add_row(g, *(str(report["confusion"][g][p]) for p in labels))
    console.print(conf)
    if kinds := report.get("by_kind"):
        moved = " (from references)"
        show_unjudged = any(k["unjudged"] for k in kinds.values())
        table = Table(title="per kind of hard case (correct: share judged as its gold label)",
                      box=box.SIMPLE_HEAD,
                      caption=f"* {MOVED_NOTE}" if any(moved in k for k in kinds) else None)
        table.add_column("kind", no_wrap=True)
        for col in ("gold", "n", "correct", *(f"→{c[:6]}" for c in labels),
                    *(["unjudged"] if show_unjudged else [])):
            table.add_column(col, justify="right")
        for kind, k in kinds.items():
            table.add_row(kind.replace(moved, "*"), k["label"], str(k["n"]), _f(k["accuracy"]),
                          *(str(k["predicted"][c]) for c in labels),
                          *([str(k["unjudged"])] if show_unjudged else []))
        console.print(table)
