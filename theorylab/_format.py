"""Numbers and values as short text, and values as JSON, for the reports and tables."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["jsonable", "fmt", "num", "md_row"]


def jsonable(x):
    """Floats, lists and dicts for the JSON reports; NaN/inf written as strings."""
    if isinstance(x, np.ndarray):
        x = x.tolist()
    elif isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    if x is None or isinstance(x, bool | int | float | str):
        return x
    return str(x)


def num(x: float) -> str:
    """A number to 4 significant digits (an integer as it is)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return str(x)
    if isinstance(x, int):
        return str(x)
    return f"{x:.4g}"


def fmt(x, width: int | None = 28) -> str:
    """Short text of a measured/expected value (numbers to 4 significant digits), cut to
    ``width`` characters (None: uncut)."""
    if isinstance(x, float | int) and not isinstance(x, bool):
        s = num(x)
    elif isinstance(x, list | tuple):
        s = "[" + ", ".join(fmt(v, None) for v in x) + "]"
    elif isinstance(x, dict):
        s = "{" + ", ".join(f"{k}: {fmt(v, None)}" for k, v in x.items()) + "}"
    else:
        s = str(x)
    return s if width is None or len(s) <= width else s[: width - 1] + "…"


def md_row(cells) -> str:
    """One row of a Markdown table (``|`` escaped, newlines folded)."""
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"
