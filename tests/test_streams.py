"""``_core.streams``: a stream is the SeedSequence spawn child or the fold_in chain it names, and
streams of different seeds do not collide the way ``seed * 1000 + k`` does."""

import jax
import numpy as np

from _core.streams import stream_key, substream, substream_seed


def test_substream_is_the_spawned_child():
    children = np.random.SeedSequence(11).spawn(5)
    for k, child in enumerate(children):
        assert (substream(11, k).generate_state(8) == child.generate_state(8)).all()
    grand = children[2].spawn(4)[3]
    assert (substream(11, 2, 3).generate_state(8) == grand.generate_state(8)).all()


def test_substream_seeds_do_not_collide_across_seeds():
    # arithmetic streams collide (seed 0's stream 1000 is seed 1's stream 0); spawned ones do
    # not: 2 020 distinct 32-bit seeds (a chance collision would have probability ~5e-4)
    seeds = {substream_seed(s, k) for s in range(2) for k in range(1010)}
    assert len(seeds) == 2 * 1010
    assert all(0 <= s < 2**32 for s in seeds)


def test_stream_key_is_the_fold_in_chain():
    want = jax.random.fold_in(jax.random.fold_in(jax.random.key(4), 7), 1)
    got = stream_key(4, 7, 1)
    assert (jax.random.key_data(got) == jax.random.key_data(want)).all()
    assert not (jax.random.key_data(stream_key(4, 7)) == jax.random.key_data(got)).all()
