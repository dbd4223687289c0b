"""The convergence measure reported beside ``d2sa.efficiency`` (``iterations_to_gain``)."""

import numpy as np

from paper_checks.d2sa import iterations_to_gain

NAN = np.nan


def test_iterations_to_gain_counts_from_the_frozen_networks_psnr():
    b1 = np.array([[20.0, 24.0, 29.0, 29.6, 30.0, NAN], [20.0, 19.0, 18.0, NAN, NAN, NAN]])
    d2 = np.array([[29.0, 29.8, 30.0, NAN, NAN, NAN], [25.0, 26.0, 26.0, 26.0, NAN, NAN]])
    it_b1, it_d = iterations_to_gain(b1, d2, charge=2.5)
    # slice 0: B1 gains 10 dB, 95 % is 29.5, first reached at index 3; D2SA's curve starts after
    # stage 1 at 29.0 and first reaches 20 + 0.95 * 10 = 29.5 at index 1, plus the charge.
    # slice 1: B1 ends below its start (no gain): its whole length, 3; D2SA gains 6 dB from the
    # frozen network's 20 and reaches 25.7 at index 1.
    np.testing.assert_array_equal(it_b1, [3, 3])
    np.testing.assert_array_equal(it_d, [1 + 2.5, 1 + 2.5])
