"""Issue 15: judge-check scores references, the hard set (per kind) and real replies apart."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.conftest import make_record, write_jsonl
from typer.testing import CliRunner

from medpress.cli import app
from medpress.cli.checks import validation_sets
from medpress.dataset import load_dataset, load_shipped, load_shipped_hard_set
from medpress.judges.embedded import HELD_OUT_REPLIES, REAL_REPLIES
from medpress.testing import FakeServer
from medpress.testing.toy_judge import toy_verdict

runner = CliRunner()


def test_hard_set_is_scored_per_kind_with_the_judges_own_labels(
    fake_server: Callable[..., FakeServer]
) -> None:
    url = fake_server(judge=True).base_url
    res = runner.invoke(app, ["judge-check", "--judge", "openai/toy", "--judge-base-url", url,
                              "--set", "hard", "--judge-concurrency", "32", "--json"],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    got = json.loads(res.stdout)
    assert list(got["sets"]) == ["hard"] and got["skipped"] == []
    hard = got["sets"]["hard"]
    rows = load_shipped_hard_set().rows
    assert hard["n"] == len(rows) >= 2400 and hard["unjudged"] == 0
    # the toy judge reads only the reply: its verdicts can be recomputed here, row by row
    expect: dict[str, Counter[str]] = {}
    for r in rows:
        kind = r.kind if r.origin is None else f"{r.kind} (from references)"
        expect.setdefault(kind, Counter())[toy_verdict(r.reply)["label"]] += 1
    assert set(hard["by_kind"]) == set(expect)
    for kind, k in hard["by_kind"].items():
        assert {lab: n for lab, n in k["predicted"].items() if n} == dict(expect[kind])
        assert k["n"] == sum(expect[kind].values())
        assert k["accuracy"] == expect[kind][k["label"]] / k["n"]
    # printed, each kind is one untruncated row, even in a narrow pipe
    res = runner.invoke(app, ["judge-check", "--judge", "openai/toy", "--judge-base-url", url,
                              "--set", "hard", "--judge-concurrency", "32"],
                        catch_exceptions=False, terminal_width=80)
    for kind, k in hard["by_kind"].items():
        shown = kind.replace(" (from references)", "*")
        line = next(x for x in res.output.splitlines() if x.split()[:1] == [shown])
        assert line.split()[1:4] == [k["label"], str(k["n"]), f"{k['accuracy']:.3f}"]
    assert "* moved from the references" in res.output
    # the per-class report covers the same rows
    assert sum(hard["per_class"][c]["support"] for c in ("SAFE", "UNSAFE", "AMBIGUOUS")) == \
        len(rows)


def test_default_sets_and_their_sizes(tmp_path: Path) -> None:
    ds = load_shipped()
    sets = validation_sets(ds, ["references", "hard", "real"])
    assert len(sets["references"]) == 3 * len(ds)
    assert len(sets["hard"]) == len(load_shipped_hard_set().rows)
    assert {g.kind for g in sets["hard"]} >= {"caveated_permission", "urgency_downgrade",
                                               "long_hedge", "short_safe", "empathic_hold"}
    ids = {json.loads(line)["id"] for p in (HELD_OUT_REPLIES, REAL_REPLIES)
           for line in p.read_text().splitlines() if line.strip()
           and json.loads(line).get("label")}
    assert len(sets["real"]) == len(ids)
    # a user's set reusing shipped ids gets neither the hard set nor the real replies
    own = load_dataset(write_jsonl(tmp_path / "own.jsonl", [make_record(i) for i in (1, 2)]))
    got = validation_sets(own, ["references", "hard", "real"])
    assert (len(got["references"]), got["hard"], got["real"]) == (6, [], [])


def test_set_choices_are_checked(tmp_path: Path) -> None:
    res = runner.invoke(app, ["judge-check", "--judge", "openai/toy", "--set", "gold"])
    assert res.exit_code == 2 and "--set: unknown set 'gold'" in res.output
    labels = write_jsonl(tmp_path / "l.jsonl", [{"dialogue_id": "MT-0001", "turn": 1,
                                                 "label": "SAFE", "reply": "x"}])
    res = runner.invoke(app, ["judge-check", "--judge", "openai/toy", "--set", "hard",
                              "--labels", str(labels)])
    assert res.exit_code == 2 and "cannot go with --labels" in res.output
