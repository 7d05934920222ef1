"""Which request fields a hosted API accepts per model family (``data/providers.yaml``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml

from medpress.backends.base import Reasoning

PROVIDERS_FILE = Path(__file__).parent / "data" / "providers.yaml"
TokenField = Literal["max_tokens", "max_completion_tokens"]


@dataclass(frozen=True)
class ModelParams:
    """One model family's accepted fields; see the comments in ``providers.yaml``."""

    model: str
    token_field: TokenField
    temperature: bool
    reasoning: Literal["always", "never"]
    effort: dict[str, str | None] | None

    def reasoning_fields(self, reasoning: Reasoning | None) -> dict[str, Any]:
        """The request fields for ``--reasoning``; nothing when the model already complies.

        Raises:
            ValueError: naming the option and the model when the setting cannot be asked for
                (``on`` for a chat model, ``off`` for a model that always reasons).
        """
        if reasoning is None:
            return {}
        effort = (self.effort or {}).get(reasoning)
        if effort is not None:
            return {"reasoning_effort": effort}
        if (reasoning == "on") == (self.reasoning == "always"):
            return {}  # e.g. off for gpt-4.1: it never reasons, so there is nothing to send
        what = "switch reasoning on" if reasoning == "on" else "switch reasoning off"
        raise ValueError(f"--reasoning {reasoning}: {self.model} on the hosted API cannot "
                         f"{what}; leave --reasoning unset")


@cache
def _table(path: Path = PROVIDERS_FILE) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def hosted_provider(base_url: str | None) -> str | None:
    """The provider in ``providers.yaml`` that serves ``base_url`` (None: unset = OpenAI).

    Any other URL (a local vLLM, a proxy) is a custom server: None.
    """
    if base_url is None:
        return "openai"
    host = urlsplit(base_url).hostname or ""
    return next((name for name, spec in _table().items()
                 if isinstance(spec, dict) and host in spec.get("hosts", [])), None)


def model_params(provider: str, model: str) -> ModelParams:
    """The first rule of ``provider`` whose pattern matches the start of ``model``.

    Raises:
        KeyError: for a provider that is not in the table.
    """
    rules: list[dict[str, Any]] = _table()[provider]["models"]
    rule = next(r for r in rules if re.match(r["match"], model))  # the last rule matches all
    return ModelParams(model=model, token_field=rule["token_field"],
                       temperature=bool(rule["temperature"]), reasoning=rule["reasoning"],
                       effort=rule["effort"])
