"""What the torch-judged training tests share."""

from __future__ import annotations

import pytest


@pytest.fixture
def one_torch_thread():
    """Tiny tensors: torch's thread pool only waits on a busy machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
