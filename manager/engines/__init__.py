"""Sandbox engines behind one protocol (see :mod:`manager.engines.base`)."""
