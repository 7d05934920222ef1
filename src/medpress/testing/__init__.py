"""Testing aids: a fake OpenAI-compatible server with latency and fault injection."""

from medpress.testing.fake_server import FAULTS, FakeServer, echo_responder

__all__ = ["FAULTS", "FakeServer", "echo_responder"]
