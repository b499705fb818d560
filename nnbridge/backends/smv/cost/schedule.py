"""Dispatching an operator's invocations over 1–8 accelerators (spec §6.7).

Invocation groups (conv: a weight-ofmap tile; FC: a neuron tile) go to the
accelerators an operator is spread over round-robin. Dispatching a new group
waits until its accelerator has finished its previous job; the group's
invocations are then issued one after another (each after its own CPU dispatch
and cache-maintenance work) and run back to back on that accelerator. On a
machine with a single accelerator SMAUG's call blocks, so everything is serial.
DRAM bandwidth bounds the whole phase.
"""

from __future__ import annotations

from collections.abc import Sequence


def accel_phase_ns(groups: Sequence[int], cpu_ns: Sequence[float], accel_ns: Sequence[float],
                   num_accels: int, dram_bytes: int, dram_gbps: float, blocking: bool) -> float:
    """The operator's time on ``num_accels`` accelerators (``blocking``: the machine has one, and
    SMAUG waits for each invocation to finish before issuing the next)."""
    if blocking:  # serial, and never faster than the DRAM delivers the bytes
        return max(float(sum(cpu_ns) + sum(accel_ns)), dram_bytes / dram_gbps)
    free = [0.0] * num_accels
    t_cpu = 0.0
    current, accel, count = None, 0, -1
    for g, c, a in zip(groups, cpu_ns, accel_ns):
        if g != current:  # next group → next accelerator, once it is idle
            current, count = g, count + 1
            accel = count % num_accels
            t_cpu = max(t_cpu, free[accel])
        t_cpu += c
        free[accel] = max(t_cpu, free[accel]) + a
    return max(max(free), t_cpu, dram_bytes / dram_gbps)
