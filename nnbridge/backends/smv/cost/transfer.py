"""Moving tiles between host memory and the scratchpads (spec §2, §2.1, §9).

DMA: every transfer is rounded up to whole cache lines and split into requests
of at most one page; each request pays the gem5 ``dma_setup_overhead``, each
byte a per-kernel-family rate (calibrated, ``calibration.py``); the CPU must
flush the lines before a load and invalidate them after a store.
ACP: the accelerator reads/writes through the CPU's last-level cache, one line
per ``acp_hit_cycles`` with ``acp_outstanding`` requests in flight; no setup,
no cache maintenance.
"""

from __future__ import annotations

from ..config import SmvConfig


def line_bytes(nbytes: int, line: int = 32) -> int:
    return -(-nbytes // line) * line


def dma_requests(nbytes: int, page: int = 4096) -> int:
    return -(-nbytes // page) if nbytes else 0


def dma_cycles(nbytes: int, cycles_per_byte: float, cfg: SmvConfig) -> float:
    if not nbytes:
        return 0.0
    return cfg.dma_setup_cycles * dma_requests(nbytes, cfg.page_bytes) + cycles_per_byte * line_bytes(
        nbytes, cfg.cacheline_bytes)


def conversion_vectors(nbytes: int, line: int = 32, lanes: int = 8) -> int:
    """fp16↔fp32 conversion vectors a transfer of ``nbytes`` needs: SMAUG's
    ``host_load_fp16``/``host_store_fp16`` convert every cache-line-rounded page ``lanes`` elements
    at a time, on the accelerator (compute, whatever the interface)."""
    return -(-(line_bytes(nbytes, line) // 2) // lanes) if nbytes else 0


def convert_cycles(nbytes: int, cfg: SmvConfig) -> float:
    """Accelerator cycles widening (load) or narrowing (store) a transfer between host fp16 and
    scratchpad fp32."""
    return conversion_vectors(nbytes, cfg.cacheline_bytes, cfg.vector_width) * cfg.fp16_convert_cycles_per_vector


def acp_cycles(nbytes: int, cfg: SmvConfig) -> float:
    if not nbytes:
        return 0.0
    lines = -(-nbytes // cfg.cacheline_bytes)
    return lines * cfg.acp_hit_cycles / cfg.acp_outstanding


def flush_ns(nbytes: int, cfg: SmvConfig) -> float:
    """CPU cache maintenance that a DMA transfer of ``nbytes`` needs."""
    return -(-nbytes // cfg.cacheline_bytes) * cfg.flush_ns_per_line if nbytes else 0.0
