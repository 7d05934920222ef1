"""What a run will cost before it starts (``--dry-run``), and the prices behind it.

Token counts are estimates: four characters per token, replies at their ``--max-tokens``
ceiling (an upper bound; real replies are usually shorter), and the whole conversation so far
resent with every turn, as chat APIs require. Prices come from a user-editable table
(``backends/data/prices.yaml``, or ``--prices FILE``); a model with no price gets no cost, never
a guessed one.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from medpress.runner.plan import RunPlan, unit_turns

PRICES_FILE = Path(__file__).parents[1] / "backends" / "data" / "prices.yaml"
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Estimate:
    """A run's requests and token ceilings, and its cost when a price is known."""

    requests: int
    prompt_tokens: int
    completion_tokens: int
    price: dict[str, float] | None
    """``input`` and ``output`` in $ per million tokens; None when the table has none."""

    @property
    def cost(self) -> float | None:
        if self.price is None:
            return None
        return (self.prompt_tokens * self.price["input"]
                + self.completion_tokens * self.price["output"]) / 1e6


def _tokens(text: str) -> int:
    return max(1, len(text) // CHARS_PER_TOKEN)


def estimate(plan: RunPlan, spec: str, prices: Path | None = None,
             max_turns: int | None = None) -> Estimate:
    """Requests and upper-bound tokens of every turn the plan asks for (already stored turns
    included: this is the whole run), and its cost from the price table. ``max_turns`` is an
    adaptive run's turns per dialogue.

    Raises:
        ValueError: a price table that is not valid (names the file).
    """
    reply = plan.config.max_tokens
    requests = prompt = 0
    for cond in plan.conditions:
        system = _tokens(cond.system)
        for d in plan.dataset:
            history = system
            n = max_turns or unit_turns(d, plan.attack)
            for t in range(n):
                # an attacker's turns are estimated at the scripted turns' length
                user = d.turns[min(t, len(d.turns) - 1)].text
                history += _tokens(user)
                prompt += history
                history += reply
                requests += 1
    requests *= plan.repeats
    return Estimate(requests, prompt * plan.repeats, requests * reply,
                    price_for(spec, prices or PRICES_FILE))


def price_for(spec: str, path: Path) -> dict[str, float] | None:
    """The first matching price of ``path`` for ``spec``, or None.

    Raises:
        ValueError: the file cannot be read as a price table.
    """
    try:
        raw: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
        rows = raw["prices"]
        for row in rows:
            if fnmatch.fnmatch(spec, str(row["model"])):
                return {"input": float(row["input"]), "output": float(row["output"])}
    except (OSError, yaml.YAMLError, KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: not a price table ({e}); see "
                         f"{PRICES_FILE.name} for the format") from None
    return None
