"""Records of a suite other than MedPRESS: a generic dialogue schema built from the manifest.

A record holds ``id``, ``family`` (the stratum), ``topic``, ``area``, ``source``, ``urgency``,
an optional ``locale`` and ``rationale``, its ``turns`` (the manifest's ``records.pressures``,
in order: by default the five SPEC pressures, ``[initial]`` for single-turn records),
``references`` with exactly the manifest's reference kinds, the manifest's ``card`` fields as
required non-empty strings and its ``optional`` fields as optional non-empty strings. Any other
field is an error. The model has the attributes the runner and the judges read (``id``,
``family``, ``turns``, ``card``, ``references``), so a suite runs on the same code as MedPRESS.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, ClassVar, cast

from pydantic import BaseModel, ConfigDict, Field, StrictStr, create_model, field_validator

from medpress.dataset import Dataset, Dialogue, content_hash
from medpress.dataset.loader import (
    DatasetError,
    Problem,
    _raw_records,
    expand_paths,
    load_records,
)
from medpress.dataset.schema import PRESSURES, Family, Turn, Urgency
from medpress.suites.manifest import BASE_FIELDS, Suite

if TYPE_CHECKING:
    from medpress.metrics.registry import RecordIndex


class SuiteRecord(BaseModel):
    """Base of a suite's record model; `record_model` adds the references, card and optional
    fields and sets the pressures."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    card_fields: ClassVar[tuple[str, ...]] = ()
    optional_fields: ClassVar[tuple[str, ...]] = ()
    pressures: ClassVar[tuple[str, ...]] = PRESSURES

    id: StrictStr = Field(min_length=1)
    family: Family
    topic: StrictStr = Field(min_length=1)
    area: StrictStr = Field(min_length=1)
    source: StrictStr = Field(min_length=1)
    urgency: Urgency
    locale: StrictStr | None = None
    rationale: StrictStr | None = None
    turns: list[Turn] = Field(min_length=1)

    @field_validator("turns")
    @classmethod
    def _pressures(cls, v: list[Turn]) -> list[Turn]:
        got = tuple(t.pressure for t in v)
        if got != cls.pressures:
            raise ValueError(f"pressures must be {', '.join(cls.pressures)} in order, "
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


def _not_blank_optional(v: str | None) -> str | None:
    return None if v is None else _not_blank(v)


@cache
def record_model(card: tuple[str, ...], references: tuple[str, ...],
                 optional: tuple[str, ...] = (),
                 pressures: tuple[str, ...] = PRESSURES) -> type[SuiteRecord]:
    """The record model for a manifest's card fields, reference kinds, optional fields and
    pressure sequence.

    Raises:
        ValueError: a card or optional field that is also a base field (the manifest's
            validation reports these first, naming its line).
    """
    if clash := sorted((set(card) | set(optional)) & set(BASE_FIELDS)):
        raise ValueError(f"records: {clash} are base record fields, not card or optional "
                         "fields")
    nonempty: Any = (StrictStr, Field(min_length=1))
    refs = create_model(
        "References", __config__=ConfigDict(extra="forbid", frozen=True),
        **dict.fromkeys(references, nonempty))
    fields: dict[str, Any] = dict.fromkeys(card, nonempty)
    fields |= dict.fromkeys(optional, (StrictStr | None, Field(default=None, min_length=1)))
    validators: dict[str, Any] = {
        "_blank": field_validator("id", "topic", "area", "source", *card)(_not_blank)}
    if optional:
        validators["_blank_optional"] = field_validator(*optional)(_not_blank_optional)
    model = create_model("SuiteDialogue", __base__=SuiteRecord, __validators__=validators,
                         references=(refs, ...), **fields)
    model.card_fields = card
    model.optional_fields = optional
    model.pressures = pressures
    return model


def suite_record_model(suite: Suite) -> type[SuiteRecord]:
    """:func:`record_model` for a suite's manifest."""
    m = suite.manifest
    return record_model(tuple(m.records.card), tuple(m.references), tuple(m.records.optional),
                        tuple(m.records.pressures))


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
    files = suite.record_files()
    records, problems = load_records(files, model=suite_record_model(suite))
    if not problems and not records:
        problems.append(Problem(str(suite.path), None, None, None, "no records found"))
    if problems:
        raise DatasetError(problems)
    # The runner and judges read only what both record kinds share (see the module docstring).
    dialogues = cast(tuple[Dialogue, ...], tuple(records))
    return Dataset(dialogues, suite.name, suite.version, content_hash(dialogues),
                   tuple(map(str, files)))


def record_lines(suite: Suite) -> dict[str, str]:
    """Record id -> ``file:line`` where it is defined, for problems found after loading (lint's
    cross-record checks)."""
    out: dict[str, str] = {}
    for path in expand_paths(suite.record_files()):
        for line, obj, _ in _raw_records(path):
            if isinstance(obj, dict) and isinstance(obj.get("id"), str):
                out.setdefault(obj["id"], f"{path}:{line}" if line else str(path))
    return out


def record_index(suite: Suite, ds: Dataset | None = None) -> RecordIndex | None:
    """The records' card and optional fields, for metrics that read them (a field's rates, a
    suite of variants' flips), from ``ds`` or the suite's records; None for MedPRESS."""
    from medpress.metrics.registry import RecordIndex  # numpy: only when asked

    if suite.is_default:
        return None
    m = suite.manifest
    records = ds if ds is not None else load_suite_dataset(suite)
    names = [*m.records.card, *m.records.optional]
    fields = {d.id: {f: str(v) for f in names if (v := getattr(d, f, None)) is not None}
              for d in records}
    v = m.records.variants
    return RecordIndex(fields, v.group if v else None, v.operator if v else None,
                       v.clean if v else "clean")
