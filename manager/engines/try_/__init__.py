"""The try engine (binpash/try)."""
