"""The package version, in a leaf module so any layer may name it (artifacts record their producer)."""

__version__ = "0.1.0"
