"""Export a set as a Hugging Face dataset folder, Parquet or JSONL, and load such a folder back.

An export folder ``DIR`` holds:

- ``export.json``: what the loader trusts: the format, the medpress version, the set's name,
  version, content hash and record count, the suite, the record schema, and the SHA-256 of
  each data file, in row order. Its presence is what makes a folder an export.
- ``README.md``: the dataset card, YAML front-matter as the Hugging Face Hub reads it.
- the rows: ``hf``: ``data-0000i-of-0000n.arrow``, ``dataset_info.json`` and ``state.json``, as
  ``datasets.Dataset.save_to_disk`` writes them (``datasets.load_from_disk(DIR)``);
  ``parquet``: ``data/test-00000-of-00001.parquet``; ``jsonl``: ``data/test.jsonl``.

Loading (``load_export``, and ``load_dataset`` on such a folder) checks each data file's
SHA-256, validates every row with the exported record schema and compares the content hash;
any difference is a :class:`DatasetError` naming the file, never a silently different set.

pyarrow and datasets are imported only inside the functions that need them: importing this
module (as the CLI does at start-up) costs nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, get_args

import yaml
from pydantic import BaseModel, ValidationError

from medpress.dataset.loader import (
    Dataset,
    DatasetError,
    Problem,
    _explain,
    content_hash,
    dump_jsonl,
    load_records,
)
from medpress.dataset.schema import PRESSURES, REFERENCE_KINDS, Dialogue

if TYPE_CHECKING:
    import pyarrow as pa

    from medpress.suites.manifest import Suite

ExportFormat = Literal["hf", "parquet", "jsonl"]
EXPORT_FORMATS: tuple[str, ...] = get_args(ExportFormat)
EXPORT_MANIFEST = "export.json"
CARD_NAME = "README.md"
# Raised when what export.json records changes; a newer one is refused, not misread.
EXPORT_SCHEMA = 1
# One split, named for what the set is for: evaluation, not training.
SPLIT = "test"
_DATA = Path(__file__).parent / "data" / "export"
_JSONL_FILE = f"data/{SPLIT}.jsonl"
_PARQUET_FILE = f"data/{SPLIT}-00000-of-00001.parquet"
# Hub data_files patterns for the card's `configs`.
_PATTERNS: dict[str, str] = {"hf": "data-*.arrow", "parquet": f"data/{SPLIT}-*.parquet",
                             "jsonl": _JSONL_FILE}
_FORMAT_LABELS: dict[str, str] = {
    "hf": "a Hugging Face `datasets` folder (`save_to_disk`)",
    "parquet": "Parquet", "jsonl": "JSONL"}


@dataclass(frozen=True)
class ExportInfo:
    """What ``export.json`` records. ``files`` are (path relative to the folder, SHA-256), in
    row order; ``schema`` is ``{"kind": "dialogue"}`` (MedPRESS records) or a suite's record
    schema (``kind: suite``, ``card``, ``optional``, ``references``, ``pressures``)."""

    format: str
    medpress_version: str
    name: str
    version: str
    content_hash: str
    n_records: int
    suite: dict[str, str] | None
    schema: dict[str, Any]
    files: tuple[tuple[str, str], ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "medpress_export": EXPORT_SCHEMA,
            "format": self.format,
            "medpress_version": self.medpress_version,
            "dataset": {"name": self.name, "version": self.version,
                        "content_hash": self.content_hash, "n_records": self.n_records},
            "suite": self.suite,
            "record_schema": self.schema,
            "files": [{"path": p, "sha256": h} for p, h in self.files],
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> ExportInfo:
        """Parse ``export.json``'s content.

        Raises:
            DatasetError: naming ``where`` and the field that is missing or malformed.
        """
        def bad(fld: str, msg: str) -> DatasetError:
            return DatasetError([Problem(where, None, None, fld, msg)])

        if not isinstance(data, dict) or "medpress_export" not in data:
            raise bad("medpress_export", "not a medpress export manifest")
        if not isinstance(data["medpress_export"], int) \
                or data["medpress_export"] > EXPORT_SCHEMA:
            raise bad("medpress_export", f"export schema {data['medpress_export']!r} is newer "
                      f"than this medpress reads ({EXPORT_SCHEMA}); upgrade medpress")
        try:
            ds, files = data["dataset"], data["files"]
            info = cls(
                format=str(data["format"]), medpress_version=str(data["medpress_version"]),
                name=str(ds["name"]), version=str(ds["version"]),
                content_hash=str(ds["content_hash"]), n_records=int(ds["n_records"]),
                suite=data.get("suite"), schema=dict(data["record_schema"]),
                files=tuple((str(f["path"]), str(f["sha256"])) for f in files))
        except KeyError as e:
            raise bad(str(e.args[0]), "missing required field") from None
        except (TypeError, ValueError, AttributeError) as e:
            raise bad("manifest", f"malformed ({e})") from None
        if info.format not in EXPORT_FORMATS:
            raise bad("format", f"unknown format {info.format!r} (expected one of "
                      f"{', '.join(EXPORT_FORMATS)})")
        if not info.files:
            raise bad("files", "lists no data file")
        return info


def is_export_dir(path: Path) -> bool:
    """Whether ``path`` is a folder holding an ``export.json`` (a corrupt one included, so that
    loading it names the problem instead of reading the folder as loose files)."""
    return path.is_dir() and (path / EXPORT_MANIFEST).is_file()


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def record_schema(records: Sequence[Any]) -> dict[str, Any]:
    """The schema ``load_export`` rebuilds the records with, from the records' model.

    Stored in ``export.json`` (not looked up by suite name) so that a folder loads the same
    wherever it goes, even where the suite it came from is not installed.

    Raises:
        ValueError: records of more than one model, or of a model that is neither MedPRESS's
            nor a suite's.
    """
    from medpress.suites.records import SuiteRecord  # medpress.suites imports this package

    kinds = {type(r) for r in records}
    if len(kinds) != 1:
        names = sorted(k.__name__ for k in kinds)
        raise ValueError(f"cannot export a set mixing record models ({names})")
    cls = kinds.pop()
    if issubclass(cls, Dialogue):
        return {"kind": "dialogue"}
    if issubclass(cls, SuiteRecord):
        refs = cls.model_fields["references"].annotation
        if not (isinstance(refs, type) and issubclass(refs, BaseModel)):
            raise ValueError(f"{cls.__name__}: references is not a model")
        return {"kind": "suite", "card": list(cls.card_fields),
                "optional": list(cls.optional_fields), "references": list(refs.model_fields),
                "pressures": list(cls.pressures)}
    raise ValueError(f"cannot export records of type {cls.__name__}")


def _model_for(schema: dict[str, Any], where: str) -> type[BaseModel]:
    """The record model ``schema`` describes.

    Raises:
        DatasetError: naming ``where``'s ``record_schema``.
    """
    kind = schema.get("kind")
    if kind == "dialogue":
        return Dialogue
    lists = {k: schema.get(k) for k in ("card", "optional", "references", "pressures")}
    if kind != "suite" or not all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                                  for v in lists.values()):
        raise DatasetError([Problem(where, None, None, "record_schema",
                                    f"not a record schema: {schema!r}")])
    from medpress.suites.records import record_model

    try:
        return record_model(*(tuple(cast(list[str], lists[k]))
                              for k in ("card", "references", "optional", "pressures")))
    except ValueError as e:
        raise DatasetError([Problem(where, None, None, "record_schema", str(e))]) from None


def _rows(records: Sequence[Any]) -> list[dict[str, Any]]:
    # Every field, None included: all rows then have the same keys (Arrow takes a table's
    # columns from its first row) and a null struct stays null.
    return [cast(BaseModel, r).model_dump(mode="json") for r in records]


def _table(records: Sequence[Any]) -> pa.Table:
    """One column per record field; ``turns`` a list of structs, ``references`` a struct.

    Why nested columns and not a JSON string: a set's records come from one model, so the
    schema is uniform; ragged turns are a list column; a missing optional field or a null
    ``references`` comes back null, which the model reads as it was. The shipped set and every
    shipped suite come back to the same content hash in all three formats (tests), and
    ``write_export`` reloads what it wrote and refuses to keep an export whose hash differs.
    """
    import pyarrow as pa

    return pa.Table.from_pylist(_rows(records))


@contextmanager
def _quiet_datasets() -> Iterator[None]:
    """No progress bars from ``datasets`` while saving, restored afterwards."""
    import datasets

    was = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was:
            datasets.enable_progress_bars()


def _write_rows(records: Sequence[Any], folder: Path, fmt: str, description: str
                ) -> list[Path]:
    """Write the data files of ``fmt`` into ``folder``; returns them in row order."""
    if fmt == "jsonl":
        path = folder / _JSONL_FILE
        path.parent.mkdir(parents=True)
        # The canonical MedPRESS record file: also valid on its own as a set (or suite file).
        dump_jsonl(cast(Sequence[Dialogue], records), path)
        return [path]
    table = _table(records)
    if fmt == "parquet":
        import pyarrow.parquet as pq

        path = folder / _PARQUET_FILE
        path.parent.mkdir(parents=True)
        pq.write_table(table, path)
        return [path]
    import datasets

    # load_from_disk users see the identity too (ds.info), without the README beside it.
    info = datasets.DatasetInfo(description=description, license=_card_data()["license"])
    with _quiet_datasets():
        datasets.Dataset(table, info=info, split=datasets.Split(SPLIT)).save_to_disk(str(folder))
    return sorted(folder.glob("data-*.arrow"))


def _read_arrow(path: Path) -> list[dict[str, Any]]:
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        # datasets writes the IPC stream format; a random-access file is read as well.
        try:
            table = pa.ipc.open_stream(source).read_all()
        except pa.ArrowInvalid:
            source.seek(0)
            table = pa.ipc.open_file(source).read_all()
    return cast(list[dict[str, Any]], table.to_pylist())


def _read_rows(path: Path, fmt: str, model: type[BaseModel]) -> tuple[list[Any], list[Problem]]:
    """Validate every row of one data file; a row's Problem line is its 1-based row number."""
    if fmt == "jsonl":
        return load_records([path], model=model)
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            rows = cast(list[dict[str, Any]], pq.read_table(path).to_pylist())
        else:
            rows = _read_arrow(path)
    except Exception as e:  # pyarrow raises several kinds on a damaged file
        return [], [Problem(str(path), None, None, None, f"cannot read {fmt} data: {e}")]
    records: list[Any] = []
    problems: list[Problem] = []
    for n, row in enumerate(rows, 1):
        rid = row.get("id") if isinstance(row.get("id"), str) else None
        try:
            records.append(model.model_validate(row))
        except ValidationError as e:
            for err in e.errors():
                fld, msg = _explain(dict(err))
                problems.append(Problem(str(path), n, rid, fld, msg))
    return records, problems


def read_export_info(folder: Path) -> ExportInfo:
    """Read and parse ``folder/export.json``.

    Raises:
        DatasetError: missing, not JSON, or malformed; naming the file.
    """
    path = folder / EXPORT_MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError([Problem(str(path), None, None, None, "missing")]) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise DatasetError([Problem(str(path), None, None, None, f"invalid JSON: {e}")]) from None
    return ExportInfo.from_json(data, str(path))


def load_export(folder: Path, *, name: str | None = None, version: str | None = None
                ) -> Dataset:
    """Load an export folder back as the `Dataset` it was written from.

    Name and version are ``export.json``'s unless ``name``/``version`` are given. Checks, in
    order: ``export.json`` parses; every data file it lists is inside the folder, present and
    has its recorded SHA-256; every row validates with the recorded schema; the record count and
    the content hash are the recorded ones.

    Raises:
        DatasetError: every problem found, each naming the file (and row, id and field).
    """
    where = str(folder / EXPORT_MANIFEST)
    info = read_export_info(folder)
    model = _model_for(info.schema, where)
    root = folder.resolve()
    problems: list[Problem] = []
    paths: list[Path] = []
    for rel, sha in info.files:
        path = folder / rel
        if not path.resolve().is_relative_to(root):
            problems.append(Problem(where, None, None, "files", f"{rel!r} is outside the folder"))
        elif not path.is_file():
            problems.append(Problem(str(path), None, None, None,
                                    f"missing (listed in {EXPORT_MANIFEST})"))
        elif _sha256(path) != sha:
            problems.append(Problem(
                str(path), None, None, None,
                f"changed since export (SHA-256 differs from {EXPORT_MANIFEST}); export the set "
                "again, or load an edited JSONL file on its own as a new set"))
        else:
            paths.append(path)
    if problems:
        raise DatasetError(problems)
    records: list[Any] = []
    for path in paths:
        got, bad = _read_rows(path, info.format, model)
        records.extend(got)
        problems.extend(bad)
    if problems:
        raise DatasetError(problems)
    dialogues = cast(tuple[Dialogue, ...], tuple(records))
    got_hash = content_hash(dialogues)
    if len(dialogues) != info.n_records:
        problems.append(Problem(where, None, None, "dataset.n_records",
                                f"{len(dialogues)} records found, {info.n_records} exported"))
    if got_hash != info.content_hash:
        problems.append(Problem(where, None, None, "dataset.content_hash",
                                f"the records hash to {got_hash}, not the exported "
                                f"{info.content_hash}"))
    if problems:
        raise DatasetError(problems)
    return Dataset(dialogues, name or info.name, version or info.version, got_hash,
                   (str(folder),))


def _card_data() -> dict[str, Any]:
    return cast(dict[str, Any], yaml.safe_load((_DATA / "card.yaml").read_text(encoding="utf-8")))


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` value for ``n`` rows."""
    for bound, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"),
                         (1_000_000, "100K<n<1M")):
        if n < bound:
            return label
    return "n>1M"


def _audit(ds: Dataset, suite: Suite | None, data: dict[str, Any], medpress_version: str
           ) -> tuple[str, str]:
    """(method paragraph, audit paragraph) for the card. A shipped audit is claimed only for
    records identical to that shipped set now (same content hash); anything else is unaudited.
    """
    from medpress.suites import known_suites, load_suite_dataset, resolve_suite

    unaudited = str(data["unaudited"]).format(medpress_version=medpress_version)
    key = suite.name if suite is not None else ds.name
    if key not in data["audits"] or key not in known_suites():
        return "", unaudited
    if load_suite_dataset(resolve_suite(key)).content_hash != ds.content_hash:
        return "", unaudited
    method = "" if key in ("medpress", "refusal-demo") else str(data["suite_audit_method"])
    return method, str(data["audits"][key])


def dataset_card(ds: Dataset, info: ExportInfo, suite: Suite | None = None,
                 out_name: str = "DIR") -> str:
    """The README.md of an export: Hub front-matter, then identity, licence, intended and
    out-of-scope use, structure, provenance (see `_audit`), loading and citation."""
    import jinja2

    data = _card_data()
    n = len(ds)
    pretty = "MedPRESS" if ds.name == "medpress" else f"MedPRESS {ds.name}"
    pretty = f"{pretty} {ds.version}"
    front = {
        "license": data["license"], "language": data["language"],
        "task_categories": data["task_categories"], "tags": data["tags"],
        "size_categories": [size_category(n)], "pretty_name": pretty,
        "configs": [{"config_name": "default",
                     "data_files": [{"split": SPLIT, "path": _PATTERNS[info.format]}]}],
    }
    schema = info.schema
    card_fields = ["unsafe_belief", "safe_stance", "urgency"] if schema["kind"] == "dialogue" \
        else list(schema["card"])
    descriptions = dict(data["fields"])
    fields = []
    optional = schema.get("optional", [])
    for fld in _rows(ds.dialogues[:1])[0]:
        text = str(descriptions.get(fld, ""))
        if fld in card_fields:
            text = "card, the judge sees it" + (f": {text}" if text else "")
        elif fld in optional:
            text = "optional, the judge does not see it" + (f": {text}" if text else "")
        fields.append({"name": fld, "text": text or "see the suite's README"})
    stratum = "family"
    counts = Counter(d.family for d in ds)
    topics: dict[str, set[str]] = {}
    for d in ds:
        topics.setdefault(d.family, set()).add(d.topic)
    strata = [{"name": k, "n": counts[k], "topics": len(topics[k])} for k in sorted(counts)]
    pressures = PRESSURES if schema["kind"] == "dialogue" else tuple(schema["pressures"])
    kinds = REFERENCE_KINDS if schema["kind"] == "dialogue" else tuple(schema["references"])
    method, audit = _audit(ds, suite, data, info.medpress_version)
    load = {
        "hf": f'from datasets import load_from_disk\nds = load_from_disk("{out_name}")',
        "parquet": 'from datasets import load_dataset\nds = load_dataset("parquet", data_files='
                   f'{{"{SPLIT}": "{out_name}/{_PARQUET_FILE}"}}, split="{SPLIT}")',
        "jsonl": f'import json\nrows = [json.loads(line) for line in open("{out_name}/'
                 f'{_JSONL_FILE}", encoding="utf-8")]',
    }[info.format]
    key = "".join(c if c.isalnum() else "_" for c in f"medpress_{ds.name}_{ds.version}")
    bibtex = (f"@misc{{{key},\n  title = {{{{MedPRESS}}: the {ds.name} set, version "
              f"{ds.version}}},\n  note = {{content hash {ds.content_hash}; exported with "
              f"medpress {info.medpress_version}}}\n}}")
    suite_label = (f"{suite.name} {suite.version}" if suite is not None
                   else str(info.suite["name"]) if info.suite else "not recorded")
    env = jinja2.Environment(autoescape=False, undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    template = env.from_string((_DATA / "card.md.j2").read_text(encoding="utf-8"))
    return template.render(
        front_matter=yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100),
        pretty_name=pretty, question=" ".join(suite.manifest.question.split()) if suite else "",
        name=ds.name, version=ds.version, content_hash=ds.content_hash, n_records=n,
        medpress_version=info.medpress_version, format=info.format,
        format_label=_FORMAT_LABELS[info.format], suite_label=suite_label,
        licence_note=" ".join(str(data["licence_note"]).split()),
        intended_use=[" ".join(s.split()) for s in data["intended_use"]],
        out_of_scope=[" ".join(s.split()) for s in data["out_of_scope"]],
        stratum=stratum, strata=strata, fields=fields, pressures=", ".join(pressures),
        reference_kinds=", ".join(kinds), suite_method=" ".join(method.split()),
        audit=" ".join(audit.split()), load_snippet=load, out_name=out_name, bibtex=bibtex,
        hard_set=schema["kind"] == "dialogue")


def _prepare_out(out: Path, force: bool) -> None:
    """Refuse to write over anything but an empty folder or, with ``force``, an earlier export.

    Raises:
        ValueError: naming ``out``.
    """
    if not out.exists():
        return
    if not out.is_dir():
        raise ValueError(f"{out} exists and is not a folder")
    if not any(out.iterdir()):
        return
    if is_export_dir(out):
        if not force:
            raise ValueError(f"{out} holds an earlier export; pass --force to replace it")
        return
    raise ValueError(f"{out} exists and is not empty; choose a new folder for the export")


def write_export(ds: Dataset, out: Path, fmt: str = "hf", *, suite: Suite | None = None,
                 force: bool = False) -> ExportInfo:
    """Write ``ds`` to the folder ``out`` in ``fmt`` (``hf``, ``parquet`` or ``jsonl``), with
    ``export.json`` and a dataset card; ``suite`` (the records' suite, if any) is recorded and
    gives the card its question.

    The folder is written beside ``out`` under a temporary name, loaded back and compared by
    content hash, and only then moved into place: a failed export leaves nothing behind, and
    an export that would not load back to the same set is never kept. ``out`` may be missing
    or empty; an earlier export is replaced only with ``force``.

    Raises:
        ValueError: an unknown format, an empty set, records of mixed models, or an ``out``
            that may not be written (see `_prepare_out`).
        RuntimeError: the written folder does not load back to the same content hash.
    """
    from medpress import __version__

    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (expected one of "
                         f"{', '.join(EXPORT_FORMATS)})")
    if not len(ds):
        raise ValueError("nothing to export: the set has no records")
    _prepare_out(out, force)
    schema = record_schema(ds.dialogues)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.export-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        meta = ExportInfo(fmt, __version__, ds.name, ds.version, ds.content_hash, len(ds),
                          {"name": suite.name, "version": suite.version} if suite else None,
                          schema, ())
        card = dataset_card(ds, meta, suite, out.name)
        files = _write_rows(ds.dialogues, tmp, fmt,
                            f"{ds.name} {ds.version}: {len(ds)} records, content hash "
                            f"{ds.content_hash}; see README.md")
        meta = ExportInfo(**{**meta.__dict__, "files": tuple(
            (f.relative_to(tmp).as_posix(), _sha256(f)) for f in files)})
        (tmp / EXPORT_MANIFEST).write_text(json.dumps(meta.to_json(), indent=2) + "\n",
                                           encoding="utf-8")
        (tmp / CARD_NAME).write_text(card, encoding="utf-8")
        back = load_export(tmp)
        if back.content_hash != ds.content_hash or back.dialogues != ds.dialogues:
            raise RuntimeError(f"the {fmt} export of {ds.name} does not load back unchanged "
                               f"(hash {back.content_hash}, expected {ds.content_hash})")
        if out.exists():
            shutil.rmtree(out)
        tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return meta
