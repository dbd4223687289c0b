"""theorylab's ground floor: what every layer shares, and the one private package that the
others may import (as ``equinox.internal`` is for equinox's sister libraries).

- :mod:`_core.validation` -- validation at the public boundary and the numerical errors;
- :mod:`_core.runtime` -- JAX in float64 for a block, and the release of compiled programs.

Nothing here knows about a paper; ``theory``, ``nn`` and every layer above import from here.
"""
