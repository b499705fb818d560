"""One module per ``nnbridge`` subcommand; each defines ``register(subparsers)``."""
