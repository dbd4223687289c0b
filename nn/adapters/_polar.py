"""PoLAR (Lion, Zhang, Li & He 2025, arXiv 2506.03133): polar-decomposed low-rank adapter.

``h = W0 x + (alpha / r) X Theta Y^T x`` with ``X in St(m, r)``, ``Y in St(n, r)`` (Stiefel) and an
unconstrained ``Theta in R^{r x r}`` (abstract; the "identity" parameterisation of the official
code, ``peft/src/peft/tuners/polar/layer.py``, where ``lora_B = X``, ``lora_S = Theta``,
``lora_A = Y^T``). Init (that file): ``X``, ``Y`` orthogonal (``nn.init.orthogonal_``),
``Theta = 0``, so the update is zero at step 0. Stored trainable count ``r (m + n) + r^2`` per
matrix. (The paper's body could not be read from the stored copy of the arXiv page, which holds
its first screen only; what is stated here comes from the abstract and the official code.)

Because ``X`` and ``Y`` have orthonormal columns, the nonzero singular values of ``X Theta Y^T``
are those of ``Theta``: ``sr(Delta W) = sr(Theta)`` and ``||Delta W||_F = ||Theta||_F`` (derived
here; ``tests/nn/adapters/test_polar.py::test_stable_rank_identity``).

The factors are trained with the landing field (official ``callbacks/landing_callback.py``,
:func:`nn.riemannian.landing`) or a
retraction (:func:`nn.riemannian.stiefel_retraction`); :func:`polar_optimizer` builds either.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import optax

from _core.validation import check_choice, check_scalar, check_transform
from nn import riemannian as _rm

from ._core import AdapterLayer, _check_rank, register_method

__all__ = ["PoLARLinear", "stiefel_mask", "polar_optimizer"]


@register_method("polar")
class PoLARLinear(AdapterLayer):
    """PoLAR on one layer (arXiv 2506.03133; ``docs/papers/adapters_polar.md``): ``X (out, r)``,
    ``Theta (r, r)``, ``Y (fan_in, r)`` trainable."""

    X: jax.Array
    Theta: jax.Array
    Y: jax.Array
    scale: float = eqx.field(static=True)

    options = ("r", "alpha")

    @classmethod
    def complete_config(cls, config, shapes):
        r = _check_rank(config.get("r", 8), shapes)
        alpha = check_scalar(config.get("alpha", float(r)), "alpha", lower=0, closed="neither")
        return {"r": r, "alpha": alpha}

    @classmethod
    def build(cls, w, *, key, r, alpha, **_):
        (m, n), dt = w.shape, w.dtype
        kx, ky = jax.random.split(key)
        x = _rm.random_stiefel(m, r, key=kx, dtype=dt)
        y = _rm.random_stiefel(n, r, key=ky, dtype=dt)
        return cls((m, n), x, jnp.zeros((r, r), dt), y, alpha / r)

    @classmethod
    def num_params(cls, shapes, *, r, **_):
        """``sum_l r (m_l + n_l) + r^2`` (stored numbers; the manifold dimension is
        ``r (m + n) + r^2 - r (r + 1)``)."""
        return sum(r * (m + n) + r * r for m, n in shapes)

    def delta_weight(self, ctx):
        return self.scale * (self.X @ self.Theta @ self.Y.T)

    def delta(self, x, ctx, *, key=None):
        return self.scale * (((x @ self.Y) @ self.Theta.T) @ self.X.T)


def _is_polar(n):
    return isinstance(n, PoLARLinear)


def stiefel_mask(tree):
    """Boolean pytree over ``tree`` (an Adapted model or its trainable half), True at X and Y.

    >>> import nn
    >>> from nn.adapters import inject
    >>> a = inject(nn.MLP(4, 2, 3, 1, key=jax.random.key(0)), "polar", key=jax.random.key(1), r=2)
    >>> m = stiefel_mask(a).layers()["layers.0"]
    >>> m.X, m.Theta, m.Y  # X, Y on Stiefel manifolds; Theta unconstrained
    (True, False, True)
    """

    if not any(_is_polar(n) for n in jax.tree.leaves(tree, is_leaf=_is_polar)):
        raise ValueError(
            f"`tree` must hold PoLAR adapter layers (an Adapted model or its trainable half); "
            f"got {type(tree).__name__} without any."
        )

    def mark(node):
        if _is_polar(node):
            false = jax.tree.map(lambda _: False, node)
            return eqx.tree_at(lambda n: (n.X, n.Y), false, (True, True))
        return False

    return jax.tree.map(mark, tree, is_leaf=_is_polar)


def polar_optimizer(
    inner: optax.GradientTransformation,
    *,
    stiefel: str = "landing",
    lam: float = 1.0,
) -> optax.GradientTransformation:
    """The PoLAR optimiser for a whole trainable tree, around the optax transform ``inner``
    (``docs/papers/adapters_polar.md#as-implemented-here``).

    Stiefel leaves (X, Y) get ``chain(landing(lam), inner)`` (``stiefel="landing"``; the official
    code replaces the gradient of X and Y by the landing field before AdamW, weight decay 0, i.e.
    ``inner=optax.adamw(lr, weight_decay=0.0)``, with ``reg_lambda = 5e-3`` in its scripts, i.e.
    ``lam = 2.5e-3`` here, see :mod:`nn.riemannian`; ``lam = 1.0`` is the default of its
    ``finetune_commonsense.py``) or ``chain(inner, stiefel_retraction(stiefel))`` for ``stiefel``
    in {"qr", "polar", "cayley"} (a feasible Riemannian method). Every other trainable leaf gets
    ``inner`` (its own state: ``optax.partition`` initialises ``inner`` once per group).

    >>> import optax
    >>> opt = polar_optimizer(optax.sgd(0.05), stiefel="qr")
    >>> isinstance(opt, optax.GradientTransformation)
    True
    """
    check_transform(inner, "inner")
    check_choice(stiefel, "stiefel", ("landing", *_rm.RETRACTIONS))
    if stiefel == "landing":
        st = optax.chain(_rm.landing(lam), inner)
    else:
        st = optax.chain(inner, _rm.stiefel_retraction(stiefel))

    def labels(params):
        mask = stiefel_mask(params)
        return jax.tree.map(lambda b: "stiefel" if b else "euclid", mask)

    return optax.partition({"stiefel": st, "euclid": inner}, labels)
