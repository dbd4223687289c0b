"""The adaptation pipeline: the frozen backbone is bit-identical after every method's run, the
label-permutation task is solved by the probe and not by the identity map, and the data suite's
geometry is what its docstring says; the replicas train as each would alone in `nn.fit`."""

import equinox as eqx
import jax
import numpy as np
import pytest

from dynamics import acavp as A
from dynamics.acavp import data as D
from nn.acavp import SmallCNN


@pytest.fixture(scope="module")
def cnn():
    return SmallCNN(key=jax.random.key(0))


@pytest.fixture(scope="module")
def task():
    return A.target_task("perm", 0)


@pytest.mark.parametrize("method", A.METHODS)
def test_backbone_is_bit_identical_after_every_adaptation_run(cnn, task, method):
    before = [np.array(v) for v in jax.tree.leaves(cnn)]
    r = A.adapt(cnn, method, task, seeds=2, lrs=(0.5,), steps=3, batch=8, n_per_class=2)
    after = jax.tree.leaves(cnn)
    assert r.frozen_identical
    assert all(np.array_equal(a, np.asarray(b)) for a, b in zip(before, after, strict=True))
    assert r.test.shape == (2,) and np.all((0 <= r.test) & (r.test <= 1))


def test_augmented_prompt_run_keeps_the_backbone(cnn, task):
    r = A.adapt(cnn, "acavp", task, seeds=2, lrs=(0.1,), steps=2, batch=4, augment=True)
    assert r.frozen_identical


def test_splits_are_disjoint_and_labels_permuted():
    src, tgt = D._split(0)
    assert np.intersect1d(src, tgt).size == 0 and src.size + tgt.size == 1797
    _, labels = A.digits()
    t = A.target_task("perm", 0)
    n_test = t.y_test.size
    assert np.array_equal(t.y_test, (labels[tgt[:n_test]] + 3) % 10)


def test_rendering_places_the_digit_where_asked():
    imgs, _ = A.digits()
    yy, xx = np.mgrid[:32, :32]
    base = A.render(imgs[:50])[:, 0]
    moved = A.render(imgs[:50], offset=(-2.0, 2.0))[:, 0]
    cx = lambda m: (m * xx).sum() / m.sum()  # noqa: E731
    cy = lambda m: (m * yy).sum() / m.sum()  # noqa: E731
    assert np.isclose(cx(moved) - cx(base), -2.0, atol=0.05)
    assert np.isclose(cy(moved) - cy(base), 2.0, atol=0.05)
    tinted = A.render(imgs[:5], fg=(0.5, 0.2, 0.3))
    assert np.allclose(tinted[:, 1], 0.4 * tinted[:, 0], atol=1e-6)


def test_digit_sampler_is_zero_padded_bilinear():
    from scipy.ndimage import map_coordinates

    imgs = A.digits()[0][:4].astype(np.float64)
    rng = np.random.default_rng(0)
    sx, sy = rng.uniform(-3, 11, (2, 4, 300))
    got = D._bilinear(imgs, sx, sy)
    want = [map_coordinates(imgs[i], [sy[i], sx[i]], order=1, mode="grid-constant")
            for i in range(4)]  # fmt: skip
    assert np.allclose(got, want, atol=1e-12)


def test_replicas_train_as_each_alone_in_a_scan(cnn, task):
    """The Python-loop trainer of ``adapt`` (one vmapped step per call) gives every replica what
    ``nn.fit``'s scan gives it alone: its own rate, its draws from ``fold_in(key, t)``, the loss
    before each step (rates 100x apart, so a shared or swapped rate fails)."""
    import jax.numpy as jnp
    import optax

    import nn
    from dynamics.acavp import pipeline as PL

    keys = jax.random.split(jax.random.key(3), 2)
    models = [PL.build("pad", cnn, key=k, width=3) for k in keys]
    tr0 = jax.tree.map(lambda *v: jnp.stack(v), *[nn.split(m)[0] for m in models])
    frozen = nn.split(models[0])[1]
    lrs = jnp.asarray([0.3, 0.003], jnp.float32)
    idx = jnp.asarray(np.tile(np.arange(20), (2, 1)))
    counts = jnp.asarray([20, 12])
    x, y = jnp.asarray(task.x_train), jnp.asarray(task.y_train)
    final, losses = PL._fit(tr0, frozen, lrs, keys, idx, counts, x, y, 4, 5, None)
    for r in range(2):

        def loss(m, t, r=r):
            ids = idx[r][jax.random.randint(jax.random.split(jax.random.fold_in(keys[r], t))[0],
                                            (5,), 0, counts[r])]  # fmt: skip
            return nn.cross_entropy(m(x[ids]), y[ids])

        tr, _, want = nn.fit(loss, optax.adam(lrs[r]), nn.split(models[r])[0], jnp.arange(4),
                             frozen=frozen)  # fmt: skip
        got = jax.tree.map(lambda v, r=r: v[r], final)
        assert np.allclose(losses[r], want, rtol=1e-5, atol=1e-6)
        for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(tr), strict=True):
            assert np.allclose(a, b, rtol=1e-4, atol=1e-6)


def test_evaluation_scores_the_best_rate_on_the_other_sets():
    """``_evaluate`` counts every replica's validation hits, picks the rate (a block of seeds)
    with the most, and gives that block's test, shifted and training-subset accuracies as a
    replica-by-replica forward pass does (four random linear probes on random features, 2 rates x
    2 seeds; the second seed's subset padded; one probe right on 70 % of the labels)."""
    import jax.numpy as jnp

    import nn
    from dynamics.acavp import pipeline as PL

    k = jax.random.split(jax.random.key(5), 6)
    heads = [eqx.nn.Linear(8, 10, key=kk) for kk in k[:4]]
    tr = jax.tree.map(lambda *v: jnp.stack(v), *[nn.split(h)[0] for h in heads])
    frozen = nn.split(heads[0])[1]
    x = jax.random.normal(k[4], (340, 8))
    y = jnp.argmax(jax.vmap(heads[2])(x), -1)  # replica 2 (rate 1, seed 0) is always right
    y = jnp.where(jax.random.uniform(k[5], (340,)) < 0.3, (y + 1) % 10, y)  # but on 30 %
    idx = jnp.asarray([np.arange(30), np.r_[np.arange(30, 50), np.zeros(10, int)]])
    counts = jnp.asarray([30, 20])
    evals = (x[100:160], y[100:160], x[160:220], y[160:220], x[220:280], x[280:340])
    hits, best, accs = PL._evaluate(tr, frozen, idx, counts, x, y, evals)
    pred = [np.asarray(jnp.argmax(jax.vmap(h)(x), -1)) for h in heads]
    yy = np.asarray(y)
    want_hits = [int(np.sum(p[100:160] == yy[100:160])) for p in pred]
    assert np.asarray(hits).tolist() == want_hits
    want_best = int(np.argmax(np.reshape(want_hits, (2, 2)).sum(1)))
    assert int(best) == want_best
    for s in range(2):
        p, sub = pred[2 * want_best + s], np.asarray(idx[s, : int(counts[s])])
        want = [np.mean(p[a : a + 60] == yy[160:220]) for a in (160, 220, 280)]
        want.append(np.mean(p[sub] == yy[sub]))
        assert np.allclose(np.asarray(accs)[:, s], want, atol=1e-6)


def test_frequency_map_reads_each_target_class_from_its_most_predicted_source_class(cnn, task):
    """Every replica gets the greedy map of the frozen model's predictions on the training
    images through replica 0's initial prompt (ACAVP's is the same for every seed), counted
    here by hand: on the permutation task, target ``(y + 3) mod 10`` pairs with prediction y."""
    from dynamics.acavp import pipeline as PL

    models = [A.build("acavp", cnn, key=jax.random.key(i)) for i in range(2)]
    mapped = PL._frequency_mapped(models, task)
    pred = np.asarray(jax.numpy.argmax(cnn(models[0].prompt(task.x_train)), -1))
    counts = np.zeros((10, 10))
    np.add.at(counts, (task.y_train, pred), 1)
    want = np.full(10, -1)
    for _ in range(10):  # the largest remaining count, its row and column then closed
        t, s = np.unravel_index(np.argmax(counts), counts.shape)
        want[t], counts[t, :], counts[:, s] = s, -1, -1
    assert all(np.array_equal(np.asarray(m.label_map), want) for m in mapped)
    assert sorted(want) == list(range(10))


def test_trivial_augment_translation_is_scaled_to_the_canvas(cnn, task, monkeypatch):
    """The training step passes TrivialAugment 10 px x W / 224 (the paper's 10 px at 224)."""
    from dynamics.acavp import pipeline as PL

    seen = []

    def spy(images, *, key, max_translate):
        seen.append(max_translate)
        return images

    monkeypatch.setattr(PL, "trivial_augment", spy)
    jax.clear_caches()  # a step compiled by an earlier test would not trace the spy
    A.adapt(cnn, "acavp", task, seeds=2, lrs=(0.1,), steps=1, batch=4, augment=True)
    assert seen == [10.0 * 32 / 224]


def test_without_shifted_sets_the_other_accuracies_are_the_same(cnn, task):
    """``shifted=False`` skips the shifted test sets only: the chosen rate, validation, test and
    training-subset accuracies are those of the full scoring (a low-data run, its subsets
    padded)."""
    kw = dict(seeds=2, lrs=(0.01, 0.5), steps=3, batch=8, n_per_class=2, width=3)
    full = A.adapt(cnn, "pad", task, **kw)
    bare = A.adapt(cnn, "pad", task, shifted=False, **kw)
    assert set(full.shifted) == set(A.SHIFTS) and bare.shifted == {}
    assert full.lr == bare.lr
    for f in ("val", "test", "train", "val_by_lr"):
        assert np.array_equal(getattr(full, f), getattr(bare, f)), f
