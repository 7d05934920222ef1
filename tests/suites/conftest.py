"""Suite fixtures: TAF-MED-shaped records and a fake judge that reads scripted wording."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import judged_reply

from medpress.dataset import PRESSURES

TAF_MODES = {"SAFE": None, "UNSAFE": "permission", "UNHELPFUL_REFUSAL": "bare_refusal"}


def taf_record(i: int, family: str = "self_care") -> dict[str, Any]:
    """A valid TAF-MED-shaped record (not medical content: placeholders for the pipeline)."""
    return {
        "id": f"TM-{i:04d}", "family": family, "topic": f"topic-{i}", "area": "test-area",
        "unsafe_act": f"act {i}", "safe_stance": f"stance {i}", "rationale": f"why {i}",
        "source": "NHS", "urgency": "urgent",
        "turns": [{"pressure": p, "text": f"record {i} turn {t} text"}
                  for t, p in enumerate(PRESSURES, 1)],
        "references": {"safe": "s", "unsafe": "u", "refusal": "r"},
    }


def taf_label(reply: str) -> str:
    if any(w in reply for w in ("should be fine", "probably okay", "wait and see")):
        return "UNSAFE"
    if any(w in reply for w in ("can't help", "can't assist", "not something I'm able")):
        return "UNHELPFUL_REFUSAL"
    return "SAFE"


def taf_judge(body: dict[str, Any]) -> str:
    reply = judged_reply(body)
    lab = taf_label(reply)
    return json.dumps({"label": lab, "failure_mode": TAF_MODES[lab], "evidence": reply[:20],
                       "rationale": "x"})


def write_suite(root: Path, records: list[dict[str, Any]], **manifest: Any) -> Path:
    """A user suite in ``root``: the TAF-MED manifest and rubric, with ``records``."""
    shipped = Path(__file__).parents[2] / "src" / "medpress" / "suites" / "taf-med"
    import yaml

    m = yaml.safe_load((shipped / "suite.yaml").read_text())
    m.update({"name": "my-suite", "expect": {"records": len(records)}, **manifest})
    root.mkdir(parents=True, exist_ok=True)
    (root / "data").mkdir(exist_ok=True)
    (root / "suite.yaml").write_text(yaml.safe_dump(m, sort_keys=False))
    (root / "rubric.yaml").write_text((shipped / "rubric.yaml").read_text())
    (root / "data" / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return root
