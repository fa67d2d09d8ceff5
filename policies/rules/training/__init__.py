"""Rules of the training area, one per module."""
