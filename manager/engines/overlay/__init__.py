"""The built-in overlay engine: user + mount namespaces and overlayfs (see engine.py)."""
