"""One module per CLI command; each has ``register(subparsers)``."""
