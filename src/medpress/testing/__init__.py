"""Testing aids: a fake OpenAI-compatible server with latency and fault injection, and a chaos
proxy that makes any upstream throttle, fail, reset, stall and truncate."""

from medpress.testing.chaos import CHAOS_KINDS, CLIENT_KIND, ChaosProxy
from medpress.testing.fake_server import FAULTS, FakeServer, echo_responder

__all__ = ["CHAOS_KINDS", "CLIENT_KIND", "FAULTS", "ChaosProxy", "FakeServer", "echo_responder"]
