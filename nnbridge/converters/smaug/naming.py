"""SMAUG's node naming (specs/smaug-format.md §3.2 rule 2): a free name is used as
is; otherwise a per-base counter is bumped until ``<base>_<n>`` is free.
"""

from __future__ import annotations


class NameScope:
    """Unique node names in one SMAUG graph, reproducing the frontend's counters."""

    def __init__(self) -> None:
        self.used: set[str] = set()
        self.counters: dict[str, int] = {}

    def unique(self, request: str) -> str:
        name = request
        while name in self.used:
            self.counters[request] = self.counters.get(request, 0) + 1
            name = f"{request}_{self.counters[request]}"
        self.used.add(name)
        return name


def output_name(node: str, index: int = 0) -> str:
    return f"{node}/output{index}"


def data_input_name(node: str) -> str:
    return f"{node}/input0"
