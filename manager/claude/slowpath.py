"""Leaving the hot path: the rest of the package and its dependencies.

Hooks run under ``python -I -S`` with the plugin root on ``sys.path`` (start-up
in a third of the time). Work that needs site-packages (PyYAML for a YAML
config) calls :func:`enable_site` first.
"""

from __future__ import annotations

import sys


def enable_site() -> None:
    if sys.flags.no_site and "site" not in sys.modules:
        import site

        site.main()
