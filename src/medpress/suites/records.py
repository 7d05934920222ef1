"""Records of a suite other than MedPRESS: a generic dialogue schema built from the manifest.

A record holds ``id``, ``family`` (the stratum), ``topic``, ``area``, ``source``, ``urgency``,
an optional ``locale`` and ``rationale``, five ``turns`` (the SPEC pressures, in order),
``references`` with exactly the manifest's reference kinds, and the manifest's ``card`` fields
as required non-empty strings. Any other field is an error. The model has the attributes the
runner and the judges read (``id``, ``family``, ``turns``, ``card``, ``references``), so a
suite runs on the same code as MedPRESS.
"""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, Field, StrictStr, create_model, field_validator

from medpress.dataset import Dataset, Dialogue, content_hash
from medpress.dataset.loader import DatasetError, Problem, load_records
from medpress.dataset.schema import PRESSURES, Family, Turn, Urgency
from medpress.suites.manifest import Suite

# Fields every suite record has; a card field may not reuse one of these names.
BASE_FIELDS = ("id", "family", "topic", "area", "source", "urgency", "locale", "rationale",
               "turns", "references")


class SuiteRecord(BaseModel):
    """Base of a suite's record model; `record_model` adds the references and card fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    card_fields: ClassVar[tuple[str, ...]] = ()

    id: StrictStr = Field(min_length=1)
    family: Family
    topic: StrictStr = Field(min_length=1)
    area: StrictStr = Field(min_length=1)
    source: StrictStr = Field(min_length=1)
    urgency: Urgency
    locale: StrictStr | None = None
    rationale: StrictStr | None = None
    turns: list[Turn] = Field(min_length=5, max_length=5)

    @field_validator("turns")
    @classmethod
    def _pressures(cls, v: list[Turn]) -> list[Turn]:
        got = tuple(t.pressure for t in v)
        if got != PRESSURES:
            raise ValueError(f"pressures must be {', '.join(PRESSURES)} in order, "
                             f"got {', '.join(got)}")
        return v

    @property
    def card(self) -> dict[str, str]:
        """The judge's card: the manifest's ``records.card`` fields."""
        return {f: str(getattr(self, f)) for f in self.card_fields}


def _not_blank(v: str) -> str:
    if not v.strip():
        raise ValueError("must not be blank")
    return v


@cache
def record_model(card: tuple[str, ...], references: tuple[str, ...]) -> type[SuiteRecord]:
    """The record model for a manifest's card fields and reference kinds.

    Raises:
        ValueError: a card field that is also a base field.
    """
    if clash := sorted(set(card) & set(BASE_FIELDS)):
        raise ValueError(f"records.card: {clash} are base record fields, not card fields")
    nonempty: Any = (StrictStr, Field(min_length=1))
    refs = create_model(
        "References", __config__=ConfigDict(extra="forbid", frozen=True),
        **dict.fromkeys(references, nonempty))
    fields: dict[str, Any] = dict.fromkeys(card, nonempty)
    validators = {"_blank": field_validator("id", "topic", "area", "source", *card)(_not_blank)}
    model = create_model("SuiteDialogue", __base__=SuiteRecord, __validators__=validators,
                         references=(refs, ...), **fields)
    model.card_fields = card
    return model


def load_suite_dataset(suite: Suite) -> Dataset:
    """The suite's records, validated, as a `Dataset` named and versioned by the suite.

    For the default suite this is the shipped MedPRESS set itself.

    Raises:
        DatasetError: every problem, naming file:line [id] field.
        SuiteError: a records glob that matches nothing or leaves a user suite.
    """
    from medpress.dataset import load_shipped

    if suite.is_default:
        return load_shipped()
    m = suite.manifest
    model = record_model(tuple(m.records.card), tuple(m.references))
    files = suite.record_files()
    records, problems = load_records(files, model=model)
    if not problems and not records:
        problems.append(Problem(str(suite.path), None, None, None, "no records found"))
    if problems:
        raise DatasetError(problems)
    # The runner and judges read only what both record kinds share (see the module docstring).
    dialogues = cast(tuple[Dialogue, ...], tuple(records))
    return Dataset(dialogues, suite.name, suite.version, content_hash(dialogues),
                   tuple(map(str, files)))
