"""The podman and docker engines: a long-lived container per session."""
