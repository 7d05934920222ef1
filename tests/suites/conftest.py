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


def copy_suite(name: str, root: Path, data: list[dict[str, Any]], **manifest: Any) -> Path:
    """A user suite in ``root``: shipped suite ``name``'s manifest (updated by ``manifest``)
    and rubric, with the records ``data`` (``expect`` counts dropped unless given)."""
    shipped = Path(__file__).parents[2] / "src" / "medpress" / "suites" / name
    import yaml

    m = yaml.safe_load((shipped / "suite.yaml").read_text())
    m.update({"name": f"my-{name}", "expect": {}, **manifest})
    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "suite.yaml").write_text(yaml.safe_dump(m, sort_keys=False))
    (root / "rubric.yaml").write_text((shipped / "rubric.yaml").read_text())
    (root / "data" / "r.jsonl").write_text("".join(json.dumps(r) + "\n" for r in data))
    return root


def twin_record(i: int, family: str = "self_care", mirrors: str | None = None
                ) -> dict[str, Any]:
    """A valid twins-shaped record (placeholders, not medical content)."""
    rec: dict[str, Any] = {
        "id": f"BT-{i:04d}", "family": family, "topic": f"topic-{i}", "area": "test-area",
        "correct_belief": f"belief {i}", "expected_stance": f"stance {i}", "source": "NHS",
        "urgency": "routine",
        "turns": [{"pressure": p, "text": f"twin {i} turn {t} text"}
                  for t, p in enumerate(PRESSURES, 1)],
        "references": {"appropriate": "a", "false_correction": "f", "over_triage": "o"},
    }
    return rec | ({"mirrors": mirrors} if mirrors else {})


def control_record(i: int, family: str = "self_care") -> dict[str, Any]:
    """A valid control-shaped (single-turn) record."""
    return {
        "id": f"CQ-{i:04d}", "family": family, "topic": f"topic-{i}", "area": "test-area",
        "expected_answer": f"answer {i}", "source": "NHS", "urgency": "routine",
        "turns": [{"pressure": "initial", "text": f"control question {i} text"}],
        "references": {"substantive": "s", "deflect_only": "d", "refusal": "r"},
    }


TWINS_MODES = {"APPROPRIATE": None, "FALSE_CORRECTION": "unwarranted_refusal",
               "OVER_TRIAGE": "needless_escalation"}
CONTROL_MODES = {"SUBSTANTIVE": None, "DEFLECT_ONLY": "deflection_only",
                 "REFUSAL": "bare_refusal"}


def twins_label(reply: str) -> str:
    """Scripted wording on a benign twin: agreement (``always_agree``, and the ``unsafe``
    stance, which agrees) is APPROPRIATE; a refusal or a hedge withholds the answer
    (FALSE_CORRECTION); the ``safe`` stance sends the user to be seen today or to emergency care
    (OVER_TRIAGE)."""
    lab = taf_label(reply)
    if lab == "UNSAFE":
        return "APPROPRIATE"
    if lab == "UNHELPFUL_REFUSAL" or any(w in reply for w in ("depends", "both sides",
                                                              "opinions vary")):
        return "FALSE_CORRECTION"
    return "OVER_TRIAGE"


def control_label(reply: str) -> str:
    """Scripted wording on a control question: agreement answers (SUBSTANTIVE), a refusal is
    REFUSAL, anything else (the safe stance, the hedge) only redirects (DEFLECT_ONLY)."""
    lab = taf_label(reply)
    return {"UNSAFE": "SUBSTANTIVE", "UNHELPFUL_REFUSAL": "REFUSAL"}.get(lab, "DEFLECT_ONLY")


def twins_judge(body: dict[str, Any]) -> str:
    reply = judged_reply(body)
    lab = twins_label(reply)
    return json.dumps({"label": lab, "failure_mode": TWINS_MODES[lab], "evidence": reply[:20],
                       "rationale": "x", "helpfulness": control_label(reply)})


def control_judge(body: dict[str, Any]) -> str:
    reply = judged_reply(body)
    lab = control_label(reply)
    return json.dumps({"label": lab, "failure_mode": CONTROL_MODES[lab],
                       "evidence": reply[:20], "rationale": "x"})
