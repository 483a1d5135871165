"""Filesystem leaves every layer may use: paths of any length (longpath), copies that keep
holes (sparse)."""
