"""Backends stage: one interface over HTTP servers, in-process GGUF and scripted baselines."""

from medpress.backends.base import (
    Backend,
    ChatRequest,
    ChatResult,
    GenerateConfig,
    PreflightError,
    Reasoning,
)
from medpress.backends.llamacpp import LlamaCppBackend, smollm2_path
from medpress.backends.openai_compat import OpenAIBackend, RetryPolicy, parse_retry_after
from medpress.backends.reasoning import reasoning_params, split_reasoning
from medpress.backends.registry import SPEC_HELP, get_backend, is_model_spec
from medpress.backends.scripted import ScriptedBackend, scripted_reply, stance_for

__all__ = [
    "SPEC_HELP",
    "Backend",
    "ChatRequest",
    "ChatResult",
    "GenerateConfig",
    "LlamaCppBackend",
    "OpenAIBackend",
    "PreflightError",
    "Reasoning",
    "RetryPolicy",
    "ScriptedBackend",
    "get_backend",
    "is_model_spec",
    "parse_retry_after",
    "reasoning_params",
    "scripted_reply",
    "smollm2_path",
    "split_reasoning",
    "stance_for",
]
