"""Sweep throughput: the SMAUG paper's case-study axes (memory policy × accelerators × tiling
threads), widened by DMA setup cost and scratchpad size to over 1,000 points over the SMAUG zoo,
run serially and on a local Ray instance with 2 workers; points/s of each (Ray's start-up
included, and without it) and a point-for-point comparison of the two result sets.

Target (issue 16): ≥ 1,000 points; Ray results equal the serial ones.
"""

from __future__ import annotations

import csv
import tempfile
import time
from pathlib import Path

SPEC = {
    "backend": "smv",
    "models": ["minerva", "lenet5", "cnn10", "vgg_cifar", "resnet_tiny", "lstm_small", "transformer_tiny"],
    "metrics": ["latency_ms", "cycles", "dram_bytes", "utilisation_pct"],
    "space": {"mem_policy": ["dma", "acp"], "num_accels": [1, 2, 4, 8], "tiling_threads": [1, 8],
              "dma_setup_cycles": [50, 100, 200], "spad_bytes": [16384, 32768, 65536]},
}


def _rows(out: Path) -> dict[str, dict]:
    with (out / "results.csv").open(newline="") as fh:
        return {r["key"]: r for r in csv.DictReader(fh)}


def main() -> int:
    try:
        import ray
    except ImportError:
        print("ray is not installed: make bench installs the 'sweep' extra")
        return 1
    from nnbridge.sweep import parse_spec, run_sweep

    spec = parse_spec(SPEC, "bench_sweep")
    with tempfile.TemporaryDirectory() as tmp:
        serial = run_sweep(spec, Path(tmp) / "serial", serial=True)
        start = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        startup = time.perf_counter() - start
        try:
            on_ray = run_sweep(spec, Path(tmp) / "ray")
        finally:
            ray.shutdown()
        same = _rows(Path(tmp) / "serial") == _rows(Path(tmp) / "ray")
    print(f"{serial.points} points ({len(spec.models)} models), {serial.failed} failed")
    print(f"serial:            {serial.points_per_second:7.1f} points/s ({serial.seconds:.1f} s)")
    print(f"Ray, 2 workers:    {on_ray.points_per_second:7.1f} points/s ({on_ray.seconds:.1f} s; "
          f"{serial.points / (on_ray.seconds + startup):.1f} points/s counting Ray's {startup:.1f} s start-up)")
    print(f"Ray results equal the serial run point for point: {same}")
    return 0 if same and serial.points >= 1000 else 1


if __name__ == "__main__":
    raise SystemExit(main())
