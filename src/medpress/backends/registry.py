"""Turning a model spec string into a backend."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from medpress.backends.base import Backend
from medpress.backends.llamacpp import LlamaCppBackend, smollm2_path
from medpress.backends.openai_compat import OpenAIBackend, RetryPolicy
from medpress.backends.reasoning import ReasoningStyle
from medpress.backends.scripted import ScriptedBackend

SPEC_HELP = (
    "openai/<model> (with --base-url for any OpenAI-compatible server), "
    "llamacpp/<path.gguf>, smollm2 (embedded default), scripted/<behaviour>"
)


def is_model_spec(spec: str) -> bool:
    """Whether ``spec`` has the shape of a model spec: a known kind followed by ``/`` and a
    model (``openai/x``), or ``smollm2``. The model itself is checked when the backend is
    built (a GGUF path must exist, a scripted behaviour be known)."""
    kind, _, rest = spec.partition("/")
    return spec == "smollm2" or (kind in ("openai", "llamacpp", "scripted") and bool(rest))


def get_backend(
    spec: str,
    *,
    base_url: str | Sequence[str] | None = None,
    concurrency: int = 32,
    timeout_s: float = 120.0,
    max_retries: int = 6,
    api_key_env: str = "OPENAI_API_KEY",
    reasoning_style: ReasoningStyle | None = None,
    system_role: bool = True,
) -> Backend:
    """Build the backend for ``spec``.

    ``base_url`` (one URL, or several replicas of one model) only applies to ``openai/``
    specs; passing it with another spec is an error rather than silently ignored.
    ``system_role=False`` applies to every backend: the runner folds the framing into the
    first user message. Whether a backend honours a :class:`GenerateConfig` (e.g.
    ``reasoning``) is checked by ``Backend.check_config``.

    Raises:
        ValueError: for an unknown spec or a misplaced option.
    """
    kind, _, rest = spec.partition("/")
    if base_url is not None and kind != "openai":
        raise ValueError(f"--base-url only applies to openai/<model> specs, not {spec!r}")
    if kind == "openai" and rest:
        return OpenAIBackend(rest, base_url=base_url, concurrency=concurrency,
                             timeout_s=timeout_s, retry=RetryPolicy(max_retries=max_retries),
                             api_key_env=api_key_env, reasoning_style=reasoning_style,
                             system_role=system_role)
    if kind == "llamacpp" and rest:
        return LlamaCppBackend(Path(rest), system_role=system_role)
    if spec == "smollm2":
        return LlamaCppBackend(smollm2_path(), spec="smollm2", system_role=system_role)
    if kind == "scripted" and rest:
        return ScriptedBackend(rest, system_role=system_role)
    raise ValueError(f"unknown model spec {spec!r}; expected one of: {SPEC_HELP}")
