"""Independent random streams from one seed, for NumPy and JAX.

A run's seed ``s`` feeds many streams (replicates, sources, tasks). Arithmetic such as
``s * 1000 + k`` collides (stream ``k = 1000`` of seed 0 is stream 0 of seed 1) and correlates
runs across seeds; the package instead derives stream ``path`` of ``s`` as NumPy's
``SeedSequence(s).spawn`` child at that path (:func:`substream`, :func:`substream_seed`) or as
JAX's ``fold_in`` chain from ``key(s)`` (:func:`stream_key`), as the package's randomness
convention says. ``tests/test_conventions.py`` rejects seed arithmetic.
"""

from __future__ import annotations

import numpy as np

__all__ = ["substream", "substream_seed", "stream_key"]


def substream(seed: int, *path: int) -> np.random.SeedSequence:
    """The ``SeedSequence`` of stream ``path`` of ``seed``: the child that
    ``np.random.SeedSequence(seed).spawn`` gives at ``path`` (``spawn_key=path``), for
    ``np.random.default_rng``.

    >>> child = np.random.SeedSequence(3).spawn(2)[1]
    >>> bool((substream(3, 1).generate_state(4) == child.generate_state(4)).all())
    True
    """
    return np.random.SeedSequence(seed, spawn_key=tuple(int(p) for p in path))


def substream_seed(seed: int, *path: int) -> int:
    """A 32-bit integer seed for stream ``path`` of ``seed`` (the first word that
    :func:`substream` generates), for code that takes an integer seed.

    >>> substream_seed(0, 1) == substream_seed(0, 1) != substream_seed(1, 0)
    True
    """
    return int(substream(seed, *path).generate_state(1)[0])


def stream_key(seed: int, *path: int):
    """The JAX key of stream ``path`` of ``seed``: ``fold_in`` of each entry of ``path`` into
    ``jax.random.key(seed)`` in turn.

    >>> import jax
    >>> k = jax.random.fold_in(jax.random.fold_in(jax.random.key(5), 2), 7)
    >>> bool((jax.random.key_data(stream_key(5, 2, 7)) == jax.random.key_data(k)).all())
    True
    """
    import jax

    key = jax.random.key(seed)
    for p in path:
        key = jax.random.fold_in(key, p)
    return key
