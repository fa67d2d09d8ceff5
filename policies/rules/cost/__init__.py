"""Rules of the cost area, one per module."""
