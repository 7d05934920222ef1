"""Controlled vocabularies the linter checks records against, kept as data in ``data/lint/``:

- ``sources.yaml``: one spelling per public body, and the locales its guidance fits;
- ``locales.yaml``: the locales a record may declare, and the country-specific emergency
  numbers and services (``911``, ``A&E``, ``healthdirect`` …) with the locales each fits;
- ``deferral_phrases.yaml``: time frames and wait-and-see wording, which make a reply on an
  urgent or emergency card an urgency downgrade (UNSAFE), never AMBIGUOUS.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

LINT_DATA: Path = Path(__file__).parent / "data" / "lint"


@dataclass(frozen=True)
class Body:
    """A public body: canonical ``key`` (as written in ``source``) and where it applies."""

    key: str
    name: str
    locales: frozenset[str]
    international: bool = False

    def fits(self, locale: str) -> bool:
        return self.international or locale in self.locales


@dataclass(frozen=True)
class ServiceTerm:
    """A country-specific number or service, found by ``pattern``, fitting ``locales``."""

    name: str
    pattern: re.Pattern[str]
    locales: frozenset[str]


@dataclass(frozen=True)
class Vocab:
    bodies: dict[str, Body]
    aliases: dict[str, str]  # wrong spelling -> canonical key
    locales: dict[str, str]  # code -> country name
    terms: tuple[ServiceTerm, ...]
    deferrals: tuple[re.Pattern[str], ...]

    def source_parts(self, source: str) -> list[str]:
        """``source`` split into bodies on ``/``, keeping a key that itself holds a slash
        (``AHA/ASA``) whole: ``"AHA/ASA/WHO"`` -> ``["AHA/ASA", "WHO"]``."""
        toks = [t.strip() for t in source.split("/")]
        out: list[str] = []
        i = 0
        while i < len(toks):
            pair = "/".join(toks[i : i + 2])
            if i + 1 < len(toks) and pair in self.bodies:
                out.append(pair)
                i += 2
            else:
                out.append(toks[i])
                i += 1
        return out

    def services_in(self, text: str) -> list[ServiceTerm]:
        """Every service term named in ``text``, in vocabulary order."""
        return [t for t in self.terms if t.pattern.search(text)]

    def deferral_in(self, text: str) -> str | None:
        """The first deferral phrase found in ``text`` (as written there), or None."""
        for p in self.deferrals:
            if m := p.search(text):
                return m.group(0)
        return None


@cache
def load_vocab(root: Path = LINT_DATA) -> Vocab:
    """Read the three vocabulary files (once per process)."""
    src = yaml.safe_load((root / "sources.yaml").read_text())["bodies"]
    bodies = {k: Body(k, str(v["name"]), frozenset(v.get("locales") or ()),
                      bool(v.get("international", False))) for k, v in src.items()}
    aliases = {a: k for k, v in src.items() for a in v.get("aliases") or ()}
    loc = yaml.safe_load((root / "locales.yaml").read_text())
    terms = tuple(ServiceTerm(str(t["name"]),
                              re.compile(t["pattern"], re.I if t.get("ignore_case") else 0),
                              frozenset(t["locales"])) for t in loc["terms"])
    phrases = yaml.safe_load((root / "deferral_phrases.yaml").read_text())["phrases"]
    return Vocab(bodies, aliases, {str(k): str(v) for k, v in loc["locales"].items()}, terms,
                 tuple(re.compile(p, re.I) for p in phrases))
