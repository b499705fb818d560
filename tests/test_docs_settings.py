"""The docs name every setting a simulator takes, as the code declares it (type, default, meaning):
each doc's table is what ``tools/settings_docs.py`` writes from the backend's declarations."""

from __future__ import annotations

import pytest

from tools.settings_docs import DOCS, marked, table


@pytest.mark.parametrize("name", sorted(DOCS))
def test_the_docs_settings_table_is_the_backends_own(name):
    found = marked(name).search(DOCS[name].read_text())
    assert found, f"{DOCS[name]} lacks its settings block"
    assert found.group(2) == table(name), f"{DOCS[name]}'s settings table is stale: run python -m tools.settings_docs"
