"""What a generation run covers, and the provenance that pins it for resuming."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from medpress import __version__
from medpress.backends import Backend, GenerateConfig
from medpress.conditions import Condition
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
        return self.repeats * sum(len(d.turns) for d in self.dataset)

    def params(self) -> dict[str, Any]:
        """Everything that must match for a run directory to be resumed."""
        return {
            "generation": self.config.as_dict(),
            "conditions": [c.name for c in self.conditions],
            "repeats": self.repeats,
        }

    def provenance(self, backend: Backend) -> dict[str, Any]:
        return {
            "medpress_version": __version__,
            "model": backend.identity(),
            "params": self.params(),
            "dataset": {"name": self.dataset.name, "version": self.dataset.version,
                        "hash": self.dataset.content_hash, "n_dialogues": len(self.dataset),
                        "paths": list(self.dataset.paths),
                        "ids": [d.id for d in self.dataset]},
            "conditions": {"version": self.conditions[0].version if self.conditions else None,
                           "hashes": {c.name: c.text_hash for c in self.conditions}},
        }
