"""Rules of the registry area, one per module."""
