"""The namespace holder: a separate program, standard library only, run with ``python -I``."""
