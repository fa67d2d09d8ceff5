"""Rules of the serving area, one per module."""
