"""Repeated reference runs reuse freed memory instead of faulting fresh pages in (counted, not timed).

The allocation pattern is a run's in miniature: ten 512 KiB activations alive together, then
freed, after the process freed a 1 MiB block (which sets glibc's dynamic thresholds: blocks up
to 1 MiB from the heap, more than 2 MiB of free heap handed back). Each case runs in a fresh
process, so the allocator's history is exactly this one.
"""

from __future__ import annotations

import ctypes
import subprocess
import sys

import pytest

PATTERN = """
import resource
import numpy as np
{setup}
freed = np.ones(1 << 18, np.float32)
del freed

def run():
    activations = [np.ones(1 << 17, np.float32) for _ in range(10)]
    del activations

run()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
run()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""

COMPILE = """
import numpy as np
from onnx import helper
import nnbridge
graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", 1, [4])], [helper.make_tensor_value_info("y", 1, [4])])
nnbridge.compile(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), backend="reference")
"""


def _page_faults_of_second_run(setup: str) -> int:
    done = subprocess.run([sys.executable, "-c", PATTERN.format(setup=setup)], capture_output=True, text=True,
                          check=True)
    return int(done.stdout.split()[-1])


pytestmark = pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallopt"),
                                reason="the C library has no mallopt (not glibc)")


def test_without_fixed_thresholds_the_second_run_faults_its_activations_in_again():
    # the premise: glibc's own thresholds hand the 5 MiB back and fault it in again (1,280 pages)
    assert _page_faults_of_second_run("") >= 640


def test_compiling_for_the_reference_backend_makes_the_second_run_reuse_freed_memory():
    assert _page_faults_of_second_run(COMPILE) <= 16
