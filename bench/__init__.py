"""Benchmarks (`make bench`): each ``bench_*.py`` module has ``main()`` printing its figures."""
