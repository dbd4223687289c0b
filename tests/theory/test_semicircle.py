import pytest
from scipy.integrate import quad

from theory.bbp import bbp_overlap, bbp_top_eigenvalue, tw_edge_shift
from theory.semicircle import semicircle_cdf, semicircle_pdf, semicircle_stieltjes


@pytest.mark.parametrize("scale", [0.5, 1.0, 2.0])
def test_pdf_integrates_to_one_and_cdf_matches(scale):
    mass, _ = quad(semicircle_pdf, -2 * scale, 2 * scale, args=(scale,), epsabs=1e-13)
    assert abs(mass - 1) < 1e-10
    for x in (-1.7 * scale, -0.3 * scale, 0.0, 1.1 * scale):
        val, _ = quad(semicircle_pdf, -2 * scale, x, args=(scale,), epsabs=1e-13)
        assert abs(val - semicircle_cdf(x, scale)) < 1e-10
    # second moment scale²
    m2, _ = quad(lambda x: x * x * semicircle_pdf(x, scale), -2 * scale, 2 * scale)
    assert abs(m2 - scale**2) < 1e-10


@pytest.mark.parametrize("z", [2.5, -3.0, 0.3 + 0.2j])
def test_stieltjes_equals_integral(z):
    f = lambda x, part: getattr(semicircle_pdf(x) / (x - z), part)  # noqa: E731
    re, _ = quad(f, -2, 2, args=("real",), epsabs=1e-13, limit=200)
    im, _ = quad(f, -2, 2, args=("imag",), epsabs=1e-13, limit=200)
    assert abs(semicircle_stieltjes(z) - complex(re, im)) < 1e-9


def test_bbp_limits():
    assert bbp_top_eigenvalue(0.5) == 2.0 and bbp_top_eigenvalue(2.0) == 2.5
    assert bbp_overlap(0.9) == 0.0 and bbp_overlap(2.0) == 0.75
    # continuity at the transition
    assert abs(bbp_top_eigenvalue(1 + 1e-9) - 2) < 1e-8 and bbp_overlap(1 + 1e-9) < 1e-8
    assert tw_edge_shift(1000) == pytest.approx(-1.2065335745820 / 100)
    with pytest.raises(ValueError, match="beta"):
        bbp_overlap(-1.0)
