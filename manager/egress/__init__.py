"""Setting ``network`` and the egress record (issue 24): what sandboxed commands may reach.

The runtime parts (the proxy, the forwarder) are stdlib-only and live beside the holder:
:mod:`manager.engines.overlay.holder.egress_proxy`.
"""
