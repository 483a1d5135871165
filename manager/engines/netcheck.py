"""doctor's line on setting ``network`` for the engines without the overlay engine's proxy
(issue 24): what they enforce, what they refuse, and whether the current setting runs.
The overlay engine probes its own (``overlay/netprobe.py``, the same check name)."""

from __future__ import annotations

from manager.engines.base import Check

TYPE_CHECKING = False
if TYPE_CHECKING:
    from manager.config import Config

NAME = "network confinement"
LIST_FIX = "use engine overlay for a list of hosts (its proxy), or network: off"


def for_containers(config: Config) -> Check:
    value = config["network"]
    listed = isinstance(value, list)
    if listed and config["container.network"]:
        return Check(NAME, False, "network is a list of hosts, which only the overlay engine's "
                                  "proxy enforces: every call is refused while container.network "
                                  "is true", LIST_FIX)
    return Check(NAME, True, "network off: --network none (only lo inside); a list of hosts: no "
                             "network at all with container.network false, refused with it true; "
                             "no egress record (no proxy)", LIST_FIX, warn=True)


def for_try(config: Config) -> Check:
    from manager.egress import launch
    from manager.engines.try_ import probe as try_probe

    path = try_probe.find(config["try.path"])
    has_x = path is not None and launch.try_has_x(str(path))
    value = config["network"]
    runs = value == "open" or (value == "off" and has_x)
    cut = ("network off: try -x (a network namespace with only lo)" if has_x else
           "this try has no -x: network off is refused")
    detail = f"{cut}; a list of hosts: refused (no proxy); no egress record"
    if not runs:
        return Check(NAME, False, f"setting network is {value!r}, which this engine refuses: {detail}",
                     LIST_FIX if has_x else "install binpash/try main (it has -x), or use engine overlay")
    return Check(NAME, True, detail, LIST_FIX, warn=True)
