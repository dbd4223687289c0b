"""The properties of each paper (``theorylab verify``), one module per area.

Importing this package imports every module in it, each registering its properties with
:func:`paper_checks.prop`.
"""

import importlib
import pkgutil

for _info in pkgutil.iter_modules(__path__):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
