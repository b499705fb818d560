"""The light models' graphs and oracle outputs are cached per module, not per session: held to the
end they kept ~1.6 GB alive in a pytest worker (VGG-19's and ZFNet's weights)."""

from __future__ import annotations

from collections.abc import Iterator

import passcheck
import pytest


@pytest.fixture(autouse=True, scope="module")
def _release_light_models() -> Iterator[None]:
    yield
    for cached in (passcheck.light_model, passcheck.light_graph, passcheck.light_case):
        cached.cache_clear()
