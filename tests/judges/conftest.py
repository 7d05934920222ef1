"""The embedded judge trained once per test session (it takes minutes), read-only to tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from medpress.dataset import load_shipped
from medpress.judges.embedded import HELD_OUT_REPLIES, train_embedded


@pytest.fixture(scope="session")
def embedded_trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """(model folder, meta) of the embedded judge trained on the shipped set with seed 0,
    scored on the packaged held-out real replies. Tests must not write into the folder."""
    out = tmp_path_factory.mktemp("embedded")
    return out, train_embedded(load_shipped(), seed=0, out=out, real_check=HELD_OUT_REPLIES)
