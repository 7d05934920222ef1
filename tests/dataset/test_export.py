"""Issue 23 item 2: `medpress data export` (hf, parquet, jsonl) and `--dataset` on the folder.

Round trips are exact: the folder loads back with the same content hash and the same records in
the same order; the folder is what `datasets` and plain JSON readers expect; anything changed
after export is refused with a message naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.conftest import make_record, write_jsonl
from typer.testing import CliRunner

from medpress.dataset import (
    EXPORT_FORMATS,
    Dataset,
    DatasetError,
    is_export_dir,
    load_dataset,
    load_export,
    load_shipped,
    resolve_dataset,
    write_export,
)
from medpress.store import RunStore
from medpress.suites import load_suite_dataset, resolve_suite

runner = CliRunner()
SUITES = ("medpress", "twins")


@pytest.fixture(autouse=True)
def _offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[tuple[str, str], Path]]:
    """Each shipped suite of SUITES in each format, exported once for the module."""
    root = tmp_path_factory.mktemp("exports")
    out: dict[tuple[str, str], Path] = {}
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        for name in SUITES:
            suite = resolve_suite(name)
            for fmt in EXPORT_FORMATS:
                out[name, fmt] = root / f"{name}-{fmt}"
                write_export(load_suite_dataset(suite), out[name, fmt], fmt, suite=suite)
        yield out


def invoke(*args: str) -> Any:
    from medpress.cli import app

    return runner.invoke(app, list(args))


def one_line(output: str) -> str:
    return " ".join(output.split())


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
@pytest.mark.parametrize("name", SUITES)
def test_round_trip_same_hash_same_records(exports: dict[tuple[str, str], Path], name: str,
                                           fmt: str) -> None:
    want = load_suite_dataset(resolve_suite(name))
    folder = exports[name, fmt]
    assert is_export_dir(folder)
    for got in (load_dataset(folder), load_dataset([folder]), resolve_dataset(folder)):
        assert got.content_hash == want.content_hash
        assert got.dialogues == want.dialogues  # same models, same values, same order
        assert (got.name, got.version) == (want.name, want.version)
        assert got.paths == (str(folder),)
    assert type(load_export(folder).dialogues[0]) is type(want.dialogues[0])
    assert load_dataset(folder, name="x", version="9").name == "x"
    meta = json.loads((folder / "export.json").read_text())
    assert meta["format"] == fmt and meta["dataset"] == {
        "name": want.name, "version": want.version, "content_hash": want.content_hash,
        "n_records": len(want)}
    assert meta["suite"]["name"] == name


def test_hf_folder_loads_with_datasets(exports: dict[tuple[str, str], Path]) -> None:
    import datasets

    for name in SUITES:
        want = load_suite_dataset(resolve_suite(name))
        hf = datasets.load_from_disk(str(exports[name, "hf"]))
        assert hf.num_rows == len(want)
        assert hf["id"] == [d.id for d in want]
        assert hf.split == "test"
        row = hf[0]
        assert row["turns"] == [t.model_dump() for t in want.dialogues[0].turns]


def test_parquet_folder_loads_with_load_dataset(exports: dict[tuple[str, str], Path],
                                                tmp_path: Path) -> None:
    import datasets

    for name in SUITES:
        want = load_suite_dataset(resolve_suite(name))
        files = sorted(str(p) for p in (exports[name, "parquet"] / "data").glob("*.parquet"))
        pq = datasets.load_dataset("parquet", data_files=files, split="train",
                                   cache_dir=str(tmp_path / "cache"))
        assert pq.num_rows == len(want)
        assert pq["id"] == [d.id for d in want]
        assert pq[0]["references"] == want.dialogues[0].model_dump(mode="json")["references"]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_card_configs_let_load_dataset_read_the_folder(exports: dict[tuple[str, str], Path],
                                                       tmp_path: Path, fmt: str) -> None:
    """`load_dataset(DIR)` (and the Hub) finds the data and the `test` split from the card's
    front-matter alone. (An `hf` folder is for `load_from_disk`; `datasets` refuses it here.)"""
    import datasets

    got = datasets.load_dataset(str(exports["twins", fmt]), cache_dir=str(tmp_path / "cache"))
    assert list(got) == ["test"]
    assert got["test"]["id"] == [d.id for d in load_suite_dataset(resolve_suite("twins"))]


def test_jsonl_folder_is_plain_record_jsonl(exports: dict[tuple[str, str], Path]) -> None:
    folder = exports["medpress", "jsonl"]
    lines = (folder / "data" / "test.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    shipped = load_shipped()
    assert [r["id"] for r in rows] == [d.id for d in shipped]
    assert rows[0] == shipped.dialogues[0].model_dump(mode="json", exclude_none=True)
    # the data file is a valid set on its own too, with the same content
    assert load_dataset(folder / "data" / "test.jsonl").content_hash == shipped.content_hash


def test_card_front_matter_and_content(exports: dict[tuple[str, str], Path]) -> None:
    shipped = load_shipped()
    for fmt, pattern in (("hf", "data-*.arrow"), ("parquet", "data/test-*.parquet"),
                         ("jsonl", "data/test.jsonl")):
        text = (exports["medpress", fmt] / "README.md").read_text(encoding="utf-8")
        assert text.startswith("---\n")
        front = yaml.safe_load(text.split("---\n")[1])
        assert front["license"] == "apache-2.0" and front["language"] == ["en"]
        assert front["task_categories"] == ["text-generation"]
        assert front["size_categories"] == ["n<1K"]
        assert front["pretty_name"] == f"MedPRESS {shipped.version}"
        assert front["configs"] == [{"config_name": "default",
                                     "data_files": [{"split": "test", "path": pattern}]}]
        assert shipped.content_hash in text and f"version **{shipped.version}**" in text
        for heading in ("## Licence", "## Intended use", "## Out-of-scope use", "## Structure",
                        "## How it was made and audited", "## Citation"):
            assert heading in text
        assert "| medication_treatment | 200 |" in text
        assert "not clinicians" in text and "584 records changed" in text
        assert "Not included: records only" in text
    twins = (exports["twins", "parquet"] / "README.md").read_text(encoding="utf-8")
    assert "135 ok, 15 fixed" in twins and "| `correct_belief` | card" in twins
    assert "hard judge-validation set" not in twins.split("## How")[0]


def test_a_subset_is_not_claimed_audited(tmp_path: Path) -> None:
    shipped = load_shipped()
    part = shipped.subset([d.id for d in shipped.dialogues[:9]])
    write_export(part, tmp_path / "part", "parquet")
    text = (tmp_path / "part" / "README.md").read_text(encoding="utf-8")
    assert "no MedPRESS audit applies" in text and "584 records changed" not in text
    back = load_dataset(tmp_path / "part")
    assert back.content_hash == part.content_hash and len(back) == 9


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
def test_nulls_and_missing_fields_round_trip(tmp_path: Path, fmt: str) -> None:
    """A user set where some records have no references and only some a locale: nested
    columns keep a null struct null (the reason the records are not stored as a JSON string)."""
    recs = [make_record(i) for i in range(1, 5)]
    recs[0].pop("references")
    recs[2]["locale"] = "UK"
    recs[3]["turns"] = recs[3]["turns"][:2]  # ragged turns
    ds = load_dataset(write_jsonl(tmp_path / "mine.jsonl", recs))
    write_export(ds, tmp_path / "out", fmt)
    back = load_dataset(tmp_path / "out")
    assert back.content_hash == ds.content_hash and back.dialogues == ds.dialogues
    assert back.dialogues[0].references is None and back.dialogues[2].locale == "UK"
    assert len(back.dialogues[3].turns) == 2


def _fresh(tmp_path: Path, fmt: str) -> tuple[Path, Dataset]:
    recs = [make_record(i) for i in range(1, 4)]
    ds = load_dataset(write_jsonl(tmp_path / "src.jsonl", recs))
    out = tmp_path / f"exp-{fmt}"
    write_export(ds, out, fmt)
    return out, ds


def _data_file(folder: Path) -> Path:
    meta = json.loads((folder / "export.json").read_text())
    return folder / meta["files"][0]["path"]


def _problems(folder: Path) -> str:
    with pytest.raises(DatasetError) as e:
        load_dataset(folder)
    return "\n".join(str(p) for p in e.value.problems)


@pytest.mark.parametrize("fmt", EXPORT_FORMATS)
def test_tampered_or_missing_data_file_is_refused(tmp_path: Path, fmt: str) -> None:
    out, _ = _fresh(tmp_path, fmt)
    data = _data_file(out)
    raw = data.read_bytes()
    data.write_bytes(raw.replace(b"belief 2", b"belief X") if fmt == "jsonl" else raw + b"\0")
    msg = _problems(out)
    assert msg.startswith(str(data)) and "changed since export" in msg
    data.unlink()
    msg = _problems(out)
    assert msg.startswith(str(data)) and "missing (listed in export.json)" in msg


def test_consistent_tampering_is_caught_by_the_content_hash(tmp_path: Path) -> None:
    """Someone edits a record and fixes the file's SHA-256 in export.json: the content hash
    still tells, naming export.json."""
    out, ds = _fresh(tmp_path, "jsonl")
    data = _data_file(out)
    data.write_text(data.read_text().replace("belief 2", "belief X"))
    meta = json.loads((out / "export.json").read_text())
    from medpress.dataset.export import _sha256

    meta["files"][0]["sha256"] = _sha256(data)
    (out / "export.json").write_text(json.dumps(meta))
    msg = _problems(out)
    assert msg.startswith(str(out / "export.json")) and "dataset.content_hash" in msg
    assert ds.content_hash in msg


@pytest.mark.parametrize(("mutate", "words"), [
    (lambda t: "{not json", "invalid JSON"),
    (lambda t: json.dumps({**json.loads(t), "medpress_export": 99}), "newer than this"),
    (lambda t: json.dumps({k: v for k, v in json.loads(t).items() if k != "files"}),
     "files: missing required field"),
    (lambda t: json.dumps({**json.loads(t), "format": "csv"}), "unknown format 'csv'"),
    (lambda t: json.dumps({**json.loads(t), "record_schema": {"kind": "other"}}),
     "record_schema: not a record schema"),
    (lambda t: json.dumps({**json.loads(t), "files": [{"path": "../src.jsonl",
                                                       "sha256": "0"}]}), "outside the folder"),
])
def test_corrupt_manifest_is_named(tmp_path: Path, mutate: Any, words: str) -> None:
    out, _ = _fresh(tmp_path, "parquet")
    manifest = out / "export.json"
    manifest.write_text(mutate(manifest.read_text()))
    msg = _problems(out)
    assert msg.startswith(str(manifest)) and words in msg


def test_export_dir_must_be_alone(tmp_path: Path) -> None:
    out, _ = _fresh(tmp_path, "jsonl")
    with pytest.raises(DatasetError, match="must be given on its own"):
        load_dataset([out, tmp_path / "src.jsonl"])


def test_out_folder_rules(tmp_path: Path) -> None:
    out, ds = _fresh(tmp_path, "jsonl")
    with pytest.raises(ValueError, match="holds an earlier export; pass --force"):
        write_export(ds, out, "parquet")
    assert json.loads((out / "export.json").read_text())["format"] == "jsonl"  # untouched
    write_export(ds, out, "parquet", force=True)
    assert json.loads((out / "export.json").read_text())["format"] == "parquet"
    assert not (out / "data" / "test.jsonl").exists()  # no leftovers of the earlier export
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(ValueError, match="exists and is not empty"):
        write_export(ds, other, "hf", force=True)
    assert sorted(p.name for p in other.iterdir()) == ["keep.txt"]
    with pytest.raises(ValueError, match="unknown export format 'csv'"):
        write_export(ds, tmp_path / "new", "csv")
    assert not (tmp_path / "new").exists()
    assert not [p for p in tmp_path.iterdir() if ".export-" in p.name]  # no temp folders left


def test_cli_export_then_validate_stats_and_dry_run(tmp_path: Path) -> None:
    shipped = load_shipped()
    out = tmp_path / "hf-out"
    res = invoke("data", "export", "--format", "hf", "--out", str(out))
    assert res.exit_code == 0, res.output
    assert f"600 records of medpress {shipped.version}" in one_line(res.output)
    res = invoke("data", "validate", str(out))
    assert res.exit_code == 0 and f"600 dialogues valid (hash {shipped.content_hash[:12]})" \
        in res.output
    res = invoke("data", "stats", str(out))
    assert res.exit_code == 0 and f"600 dialogues, hash {shipped.content_hash[:12]}" \
        in res.output
    res = invoke("run", "-m", "scripted/always_safe", "--judge", "openai/j", "--dataset",
                 str(out), "--conditions", "direct", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "600 × 1 × 1" in res.output
    twins = tmp_path / "tw"
    res = invoke("data", "export", "--suite", "twins", "--format", "jsonl", "--out", str(twins))
    assert res.exit_code == 0, res.output
    res = invoke("data", "stats", str(twins))
    assert res.exit_code == 0 and "twins 1.1: 150 dialogues" in one_line(res.output)


def test_a_run_on_an_export_finds_its_records_again(tmp_path: Path) -> None:
    """generate records the folder as the run's dataset path; reopening the run reloads it
    and the content hash check (run_dataset) passes."""
    from medpress.runner.run_dataset import run_dataset

    out, ds = _fresh(tmp_path, "parquet")
    rd = tmp_path / "run"
    res = invoke("generate", "-m", "scripted/always_safe", "--dataset", str(out),
                 "--conditions", "direct", "--run-dir", str(rd))
    assert res.exit_code == 0, res.output
    got = run_dataset(RunStore.open_existing(rd))
    assert got.content_hash == ds.content_hash and got.dialogues == ds.dialogues


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    out, _ = _fresh(tmp_path, "parquet")
    data = _data_file(out)
    data.write_bytes(data.read_bytes() + b"x")
    res = invoke("data", "validate", str(out))
    assert res.exit_code != 0 and "Traceback" not in res.output
    assert f"{data} changed since export" in one_line(res.output)
    res = invoke("data", "export", "--suite", "twins", "--dataset", str(out), "--out",
                 str(tmp_path / "x"))
    assert res.exit_code != 0 and "--dataset applies to the medpress suite" in res.output
    res = invoke("data", "export", "--format", "csv", "--out", str(tmp_path / "y"))
    assert res.exit_code != 0 and "unknown export format 'csv'" in res.output
    res = invoke("data", "export", "--out", str(out))
    assert res.exit_code != 0 and "pass --force" in one_line(res.output)
