"""The ``theorylab`` command: runs the claims registry and the theorem figures."""

from ._cli import main

__all__ = ["main"]
