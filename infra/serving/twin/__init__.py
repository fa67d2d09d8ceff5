"""The serving fleet's twin (docs/simulate.md). Importing the package decides, before any of its modules is
loaded, whether the hot modules run compiled by mypyc or from their source (accel.py)."""

from infra.serving.twin.accel import ENGINE, REASON

__all__ = ["ENGINE", "REASON"]
