"""What a generation run covers, and the provenance that pins it for resuming."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from medpress import __version__
from medpress.attack import Attacker
from medpress.backends import Backend, GenerateConfig
from medpress.conditions import Condition, check_unique, load_conditions
from medpress.dataset import Dataset, Dialogue


@dataclass(frozen=True)
class Unit:
    """One dialogue run: a dialogue under a condition, for one repeat."""

    condition: Condition
    repeat: int
    dialogue: Dialogue

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.condition.name, self.repeat, self.dialogue.id)


@dataclass(frozen=True)
class RunPlan:
    dataset: Dataset
    conditions: Sequence[Condition]
    config: GenerateConfig
    repeats: int = 1
    suite: Mapping[str, Any] | None = None
    """The suite's identity (:func:`medpress.suites.suite_identity`); None for MedPRESS, whose
    runs record no suite key, as before suites existed."""
    bases: Mapping[str, str] | None = None
    """Defence condition -> the condition its effect is measured against (recorded, so the
    report pairs them); None or empty when the run has no defence."""
    attacker: Attacker | None = None
    """An adaptive run's attacker, which writes the user turns from turn 2 on; None when the
    user turns are the dialogues' own."""

    @property
    def attack(self) -> dict[str, Any] | None:
        """The attacker's identity, recorded with the run; None for a fixed-script run."""
        return None if self.attacker is None else self.attacker.identity()

    def __post_init__(self) -> None:
        # A condition listed twice would store the same turn twice (IntegrityError mid-run).
        check_unique([c.name for c in self.conditions])
        if self.repeats < 1:
            raise ValueError(f"--repeats must be at least 1, not {self.repeats}")

    def units(self) -> Iterator[Unit]:
        """Lazily, condition-major, so a large run never materialises every unit."""
        for cond in self.conditions:
            for rep in range(self.repeats):
                for d in self.dataset:
                    yield Unit(cond, rep, d)

    def config_for(self, repeat: int) -> GenerateConfig:
        """Repeat ``r`` samples with seed ``seed + r`` so repeats differ when temperature > 0."""
        seed = self.config.seed
        return self.config if seed is None else self.config.with_seed(seed + repeat)

    def turns_per_condition(self) -> int:
        return self.repeats * sum(unit_turns(d, self.attack) for d in self.dataset)

    def params(self) -> dict[str, Any]:
        """Everything that must match for a run directory to be resumed."""
        return {
            "generation": self.config.as_dict(),
            "conditions": [c.name for c in self.conditions],
            "repeats": self.repeats,
        } | ({"attack": self.attack} if self.attack else {})

    def provenance(self, backend: Backend) -> dict[str, Any]:
        """What the run records; :func:`resume_settings` reads the part a resume must match."""
        return {
            "medpress_version": __version__,
            "model": backend.identity(),
            # the backend's, but it shapes every prompt (framing folded into turn 1 or not)
            "params": {**self.params(), "system_role": backend.supports_system_role},
            "dataset": {"name": self.dataset.name, "version": self.dataset.version,
                        "hash": self.dataset.content_hash, "n_dialogues": len(self.dataset),
                        "paths": list(self.dataset.paths),
                        "ids": [d.id for d in self.dataset]},
            "conditions": {"version": self.conditions[0].version if self.conditions else None,
                           "hashes": {c.name: c.text_hash for c in self.conditions},
                           "template": load_conditions().template_hash}
            | ({"bases": dict(self.bases)} if self.bases else {}),
        } | ({"suite": dict(self.suite)} if self.suite is not None else {})


# Dialogue ids shown when a resume is refused for another selection.
_IDS_SHOWN = 3


def dataset_difference(old: Mapping[str, Any], new: Mapping[str, Any]) -> str | None:
    """Why a resumed run's dialogues differ from the stored run's, in terms of the options that
    choose them, or None when they are the same (or the stored run recorded no hash).

    Other ids (``--sample``, ``--ids``, ``--starter``, another ``--dataset``) are told apart
    from the same ids with other content (the dataset file changed). ``old`` and ``new`` are
    provenance mappings as in :func:`resume_settings`.
    """
    old_ds, new_ds = old.get("dataset") or {}, new.get("dataset") or {}
    if old_ds.get("hash") is None or old_ds.get("hash") == new_ds.get("hash"):
        return None
    old_ids, new_ids = list(old_ds.get("ids") or []), list(new_ds.get("ids") or [])
    if set(old_ids) != set(new_ids):
        return (f"the selected dialogues differ: stored {len(old_ids)} dialogues "
                f"({_preview(old_ids)}), now {len(new_ids)} ({_preview(new_ids)}); check "
                "--sample/--ids/--starter/--dataset")
    return (f"the {len(new_ids)} dialogues have the same ids but other content (dataset hash "
            f"stored {old_ds.get('hash')}, now {new_ds.get('hash')}): the dataset changed since "
            "the run started; pass the original with --dataset")


def _preview(ids: Sequence[str]) -> str:
    shown = ", ".join(ids[:_IDS_SHOWN])
    return shown + (", …" if len(ids) > _IDS_SHOWN else "") if ids else "none"


def unit_turns(d: Dialogue, attack: Mapping[str, Any] | None) -> int:
    """Turns one dialogue runs: its own, or an adaptive run's ``max_turns`` when set."""
    return int((attack or {}).get("max_turns") or len(d.turns))


def planned_turns(params: Mapping[str, Any], ds: Dataset) -> int:
    """How many turns a run asks for: its dialogues' turns × conditions × repeats, from the
    ``params`` it recorded (:meth:`RunPlan.params`)."""
    per_pass = sum(unit_turns(d, params.get("attack")) for d in ds)
    return per_pass * len(params.get("conditions") or []) * int(params.get("repeats") or 1)


def resume_settings(prov: Mapping[str, Any]) -> dict[str, Any]:
    """Everything that shapes a prompt or a reply, by the name a user knows it by.

    ``prov`` is :meth:`RunPlan.provenance` or the same keys read back from a store. A setting
    an older version did not record is absent, so it is not compared, except the system role:
    before it was recorded every run had one unless ``--no-system-role`` reached the OpenAI
    backend, and the default is the likelier.
    """
    params = prov.get("params") or {}
    gen = params.get("generation") or {}
    conds = prov.get("conditions") or {}
    suite = prov.get("suite") or {}
    out: dict[str, Any] = {
        # absent: MedPRESS (runs from before suites, and MedPRESS runs now)
        "--suite": (f"{suite.get('name')} {suite.get('version')} (hash {suite.get('hash')})"
                    if suite else "medpress"),
        "model spec": (prov.get("model") or {}).get("spec"),
        "dataset hash": (prov.get("dataset") or {}).get("hash"),
        "--conditions": params.get("conditions"),
        "--repeats": params.get("repeats"),
        "--system-role": params.get("system_role", True),
        "conditions version": conds.get("version"),
    }
    attack = params.get("attack") or {}
    out.update({"--attacker": attack.get("spec"), "--strategy": attack.get("strategy"),
                "--max-turns": attack.get("max_turns"),
                "attacker prompts version": attack.get("prompts_version"),
                "attacker seed": attack.get("seed")})
    names = {"temperature": "--temperature", "max_tokens": "--max-tokens", "seed": "--seed",
             "reasoning": "--reasoning", "json_mode": "json mode"}
    out.update({names.get(k, k): v for k, v in gen.items()})
    for name, h in (conds.get("hashes") or {}).items():
        out[f"condition text {name!r}"] = h
    if not out["--system-role"] and "template" in conds:  # only then is the template used
        out["no-system-role template"] = conds["template"]
    return out
