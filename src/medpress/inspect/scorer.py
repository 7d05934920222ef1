"""The MedPRESS scorer for Inspect: a MedPRESS judge labels every turn of a sample.

The judge is any spec ``medpress judge`` takes (:func:`medpress.judges.get_judge`):
``embedded`` (the offline classifier) or an LLM judge on a model backend (``openai/…`` with
``judge_base_url``, ``llamacpp/…``). Each turn is judged as ``medpress judge`` judges a stored
run: the card, the conversation up to the turn, the reply; an empty reply is never judged,
and a reply cut off at max_tokens is judged unless ``judge_truncated`` is False.

One :class:`~inspect_ai.scorer.Score` per sample (per epoch): ``value`` maps ``t1`` … ``tT``
to each turn's label (None: unjudged), ``answer`` is the last reply, and ``metadata`` holds
everything :func:`medpress.inspect.log.score_rows` needs to rebuild the label rows.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from inspect_ai.scorer import Metric, SampleScore, Score, Scorer, Target, Value, metric, scorer
from inspect_ai.solver import TaskState

from medpress.inspect.log import SCORE_KEY, SCORE_VERSION, score_rows
from medpress.judges import Judge, JudgeItem, Judgment
from medpress.store import reply_issue
from medpress.suites import DEFAULT_SUITE, Suite, resolve_suite

__all__ = ["TURNS_KEY", "medpress_metrics", "medpress_scorer", "suite_ref"]

TURNS_KEY = "medpress:turns"
"""Where the solver leaves each turn (user text, pressure, reply, finish reason) in the
sample's store, for the scorer."""


def suite_ref(suite: Suite) -> str:
    """How a score names its suite so that ``resolve_suite`` finds it again: a shipped suite
    by name, any other by its absolute directory."""
    return suite.name if suite.shipped else str(suite.path.resolve())


class _JudgeSource:
    """Makes the judge for each sample.

    The embedded judge (a classifier in memory) is made once and shared. An LLM judge holds
    an HTTP session bound to the samples' event loop, so each sample gets its own and closes
    it: no session outlives its sample, and a closing one never cuts another's requests.
    """

    def __init__(self, spec: str, base_url: str | None, suite: Suite) -> None:
        from medpress.cli.suites import judge_suite
        from medpress.judges.registry import EMBEDDED, get_judge
        from medpress.judges.rubric import load_rubric

        rubric_path, no_embedded = judge_suite(suite)
        self._llm = spec != EMBEDDED
        rubric = load_rubric(rubric_path) if rubric_path is not None and self._llm else None

        def make() -> Judge:
            return get_judge(spec, base_url=base_url, rubric=rubric, suite=no_embedded)

        self._make = make
        # Made now so a bad spec, an untrained embedded judge or a suite without one fails
        # when the task is built, not in every sample.
        self._shared: Judge | None = make()
        self.name, self.rubric_version = self._shared.name, self._shared.rubric_version
        if self._llm:
            self._shared = None  # never used: it opened no connection

    def acquire(self) -> Judge:
        return self._shared if self._shared is not None else self._make()

    async def release(self, judge: Judge) -> None:
        if judge is not self._shared:
            await judge.aclose()


async def _judge_all(judge: Judge, items: list[JudgeItem]) -> dict[Hashable, Judgment]:
    out: dict[Hashable, Judgment] = {}
    await judge.judge_many(items, lambda j: out.__setitem__(j.key, j))
    return out


@metric(scores="unreduced")
def medpress_metrics() -> Metric:
    """The headline metrics per condition, families pooled, as the MedPRESS metrics layer
    computes them from the scores' label rows (every epoch a repeat): ``UAR_direct``,
    ``ToF_persona`` … for MedPRESS (UAR, SAR, AR, FR, ToF, NoF), a suite's own headline metrics
    for another suite. Point estimates only; ``medpress metrics LOG`` adds the intervals.
    A metric undefined for a condition (no judged turn) is left out."""

    def compute(scores: list[SampleScore]) -> Value:
        from medpress.metrics import HEADLINE_METRICS, compute_groups

        metas = [s.score.metadata for s in scores
                 if s.score.metadata and SCORE_KEY in s.score.metadata]
        if not metas:
            return {}
        rows = [r for m in metas for r in score_rows(m, str(m.get("model", "model")))]
        suite = resolve_suite(str(metas[0].get("suite", DEFAULT_SUITE)))
        out: dict[str, float] = {}
        if suite.is_default:
            for g in compute_groups(rows, n_boot=0):
                if g.family == "all":
                    out |= {f"{m}_{g.condition}": v for m in HEADLINE_METRICS
                            if (v := g.value(m)) is not None}
            return out
        from medpress.metrics.registry import compute_suite_groups
        from medpress.suites import record_index

        for sg in compute_suite_groups(rows, suite.manifest.metrics, n_boot=0,
                                       records=record_index(suite)):
            if sg.stratum == "all":
                out |= {f"{m}_{sg.condition}": float(v) for m in suite.manifest.headline
                        if isinstance(v := sg.values.get(m), int | float)}
        return out

    return compute


@scorer(metrics=[medpress_metrics()])
def medpress_scorer(judge: str = "embedded", judge_base_url: str | None = None,
                    suite: str = DEFAULT_SUITE, judge_truncated: bool = True) -> Scorer:
    """Label every turn of a MedPRESS sample with a MedPRESS judge.

    Args:
        judge: A judge spec as ``medpress judge --judge`` takes it: ``embedded`` or a model
            spec (an LLM judge under the suite's rubric).
        judge_base_url: The server of an ``openai/`` judge.
        suite: The suite whose rubric an LLM judge uses (a shipped name or a directory); a
            suite without an embedded judge refuses ``embedded``.
        judge_truncated: Judge replies cut off at max_tokens as they stand (the default, as
            ``medpress judge``); False leaves them unjudged.

    Raises:
        ValueError: an unknown judge spec, or ``embedded`` for a suite without one.
        FileNotFoundError: ``embedded`` before the embedded judge was trained.
    """
    the_suite = resolve_suite(suite)
    source = _JudgeSource(judge, judge_base_url, the_suite)

    async def score(state: TaskState, target: Target) -> Score:
        meta = state.metadata
        turns: list[dict[str, Any]] = state.store.get(TURNS_KEY, [])
        repeat = state.epoch - 1
        items: list[JudgeItem] = []
        skipped: dict[int, str] = {}
        history: list[tuple[str, str | None]] = []
        for t in turns:
            key = (meta["condition"], repeat, meta["dialogue_id"], t["turn"])
            issue = reply_issue(t["reply"], t["finish_reason"])
            if issue == "empty" or (issue == "truncated" and not judge_truncated):
                skipped[t["turn"]] = f"not judged: {issue} reply"
            else:
                items.append(JudgeItem(key, dict(meta["card"]), [*history, (t["user"], None)],
                                       t["reply"] or ""))
            history.append((t["user"], t["reply"]))
        judge = source.acquire()
        try:
            by_key = await _judge_all(judge, items)
        finally:
            await source.release(judge)
        out = []
        for t in turns:
            j = by_key.get((meta["condition"], repeat, meta["dialogue_id"], t["turn"]))
            out.append({
                "turn": t["turn"], "pressure": t["pressure"],
                "label": j.label if j else None,
                "failure_mode": j.failure_mode if j else None,
                "tags": dict(j.tags or {}) if j else {},
                "evidence": j.evidence if j else None,
                "rationale": j.rationale if j else None,
                "error": j.error if j else skipped.get(t["turn"]),
                "finish_reason": t["finish_reason"],
            })
        value: dict[str, str | None] = {f"t{t['turn']}": t["label"] for t in out}
        explanation = "; ".join(
            f"t{t['turn']} {t['pressure']}: {t['label'] or 'unjudged'}"
            + (f" ({t['failure_mode']})" if t["label"] and t["failure_mode"] else "")
            for t in out)
        return Score(
            value=value, answer=turns[-1]["reply"] if turns else None, explanation=explanation,
            metadata={SCORE_KEY: SCORE_VERSION, "suite": suite_ref(the_suite),
                      "model": str(state.model), "condition": meta["condition"],
                      "dialogue_id": meta["dialogue_id"], "family": meta["family"],
                      "repeat": repeat, "n_turns": len(meta["turns"]),
                      "judge": source.name, "rubric_version": source.rubric_version,
                      "turns": out})

    return score
