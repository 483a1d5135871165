"""The namespace holder of the overlay engine: a program of its own, standard library only.

It runs as ``python -I .../engines/overlay`` (see ``overlay/__main__.py``), where this
package is the top-level ``holder``, so its modules import each other relatively and
nothing outside it. The engine imports ``names`` (the sandbox layout) and the tests the
rest as ``manager.engines.overlay.holder``.
"""
