"""Runs the namespace holder: ``python -I .../engines/overlay SANDBOX IDLE_SECONDS PROJECT``
(or the container engines' egress proxy: ``... egress-proxy SANDBOX``, and their
helper that makes the watched pair: ``... direct-attach``).

Run by its directory, this directory is the program's only import root (``-I`` adds no
other, and nothing changes the import path): the holder is the top-level package ``holder`` here,
and imports only its own modules and the standard library.
"""

import sys

if sys.argv[1:2] == ["egress-proxy"]:   # the container engines' proxy (holder/unix_proxy.py)
    from holder.unix_proxy import main  # type: ignore[import-not-found,unused-ignore]

    raise SystemExit(main(sys.argv[2:]))
if sys.argv[1:2] == ["direct-attach"]:   # in the container engines' helper (holder/direct_attach.py)
    from holder.direct_attach import main as attach  # type: ignore[import-not-found,unused-ignore]

    raise SystemExit(attach())
from holder.main import main  # type: ignore[import-not-found,unused-ignore]

raise SystemExit(main(sys.argv[1:]))
