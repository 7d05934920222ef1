"""Testing aids: a fake OpenAI-compatible server with latency and fault injection (and a toy
judge mode, so the LLM-judge path runs offline), and a chaos proxy that makes any upstream
throttle, fail, reset, stall and truncate."""

from medpress.testing.chaos import CHAOS_KINDS, CLIENT_KIND, ChaosProxy
from medpress.testing.fake_server import FAULTS, FakeServer, echo_responder, with_toy_judge
from medpress.testing.toy_judge import TOY_RULES, is_judge_request, toy_verdict

__all__ = ["CHAOS_KINDS", "CLIENT_KIND", "FAULTS", "TOY_RULES", "ChaosProxy", "FakeServer",
           "echo_responder", "is_judge_request", "toy_verdict", "with_toy_judge"]
