"""Importing this package registers every reference kernel (one module per op family)."""

from . import elementwise  # noqa: F401
