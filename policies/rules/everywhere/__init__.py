"""Rules of the everywhere area, one per module."""
