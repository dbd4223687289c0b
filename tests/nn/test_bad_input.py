"""Generated bad input over every public callable of ``nn`` (see ``tests/_bad_input.py``).

Every public callable, ``nn.adapters`` included, has a registered valid call.
"""

import jax
import jax.numpy as jnp
import numpy as np
import optax
from _bad_input import Case, case_files, make_tests

import nn
from nn import adapters as AD_
from nn import hopfield as HF
from nn import hybrid as HY
from nn import mamba2 as M2
from nn import mla as ML
from nn import quant as Q
from nn import riemannian as R

KEY = jax.random.key(0)
_g = np.random.default_rng(0)
LIN = nn.Linear(4, 2, key=KEY)
XR = _g.standard_normal((8, 4))
BATCH = (XR, _g.standard_normal((8, 2)))
SGD = optax.sgd(0.1)
TOK = jnp.asarray(_g.integers(0, 8, (2, 6)))
LM = nn.TransformerLM(8, 8, 2, 1, 8, key=KEY)
LOGITS = _g.standard_normal((3, 5))
TARGETS = jnp.asarray([0, 3, 4])
Q64, _ = np.linalg.qr(_g.standard_normal((6, 2)))
V62 = _g.standard_normal((6, 2)) * 0.1
S2 = _g.standard_normal((2, 2))
ATT = _g.standard_normal((1, 4, 2, 4))  # (batch, length, heads, head_dim)
P3 = np.array([[0.8, 0.2, 0.0], [0.1, 0.8, 0.1], [0.0, 0.3, 0.7]])
XQ = _g.standard_normal((2, 32))


QH = _g.standard_normal((1, 2, 3, 4))  # (batch, heads, T, head_dim)
H33 = _g.standard_normal((1, 2, 3, 3))
HLM = HF.hopfield_lm(8, 8, 2, 1, 8, alpha_prime=0.5, key=KEY)
IMG = _g.standard_normal((2, 4, 4))
GQA = ML.GQAttention(8, 2, 1, 4, rope_theta=100.0, key=KEY)
MLAL = ML.MLA(8, 2, 1, kv_rank=4, nope_dim=2, v_dim=4, rope_dim=2, key=KEY)
X8 = _g.standard_normal((1, 3, 8))
SX = _g.standard_normal((1, 4, 2, 3))  # (batch, T, heads, P)
SDT = np.abs(_g.standard_normal((1, 4, 2))) + 0.1
SA = -np.array([0.5, 1.0])
SB = _g.standard_normal((1, 4, 2, 2))
HLM2 = HY.HybridLM(8, 8, 2, 1, 4, ("gqa",), mlp_hidden=8, rope_theta=100.0, key=KEY)


MLPB = nn.MLP(8, 4, 8, 1, activation=jax.nn.relu, key=KEY)
AD = AD_.inject(MLPB, "lora", key=KEY, r=2)
ADP = AD_.inject(MLPB, "polar", key=KEY, r=2)
ADR = AD_.inject(MLPB, "ravan", key=KEY, r=2, heads=2)
BASES = AD_.kaiming_uniform_bases(2, 8, 8, key=KEY)
IDX, VAL = AD_.isometric_projection(40, 5)
ADAPTER_FILE = "/tmp/_bad_input_adapter.safetensors"
AD_.save_adapter(ADAPTER_FILE, AD)
PROBS = np.array([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8]])


def _mse(m, batch, *, key=None):
    X, y = batch
    return jnp.mean((m(X) - y) ** 2)


def _save(path="/tmp/_bad_input_nn.eqx", tree=LIN):
    return nn.save(path, tree)


_save()

CASES = {
    "nn.Linear": Case(nn.Linear, dict(in_features=4, out_features=2, key=KEY)),
    "nn.MLP": Case(nn.MLP, dict(in_features=4, out_features=2, width=8, depth=2, key=KEY)),
    "nn.Embedding": Case(nn.Embedding, dict(num_embeddings=8, dim=4, key=KEY)),
    "nn.RMSNorm": Case(nn.RMSNorm, dict(dim=4)),
    "nn.causal_attention": Case(nn.causal_attention, dict(q=ATT, k=ATT, v=ATT)),
    "nn.CausalSelfAttention": Case(nn.CausalSelfAttention, dict(d_model=8, num_heads=2, key=KEY)),
    "nn.TransformerBlock": Case(nn.TransformerBlock, dict(d_model=8, num_heads=2, key=KEY)),
    "nn.TransformerLM": Case(
        nn.TransformerLM,
        dict(vocab_size=8, d_model=8, num_heads=2, num_layers=1, max_len=8, key=KEY),
    ),
    "nn.default_float": Case(nn.default_float, {}),
    "nn.uniform_fan_in": Case(nn.uniform_fan_in, dict(fan_in=4)),
    "nn.set_matmul": Case(nn.set_matmul, dict(model=LIN, matmul=None)),
    "nn.trainable_mask": Case(nn.trainable_mask, dict(model=LIN)),
    "nn.split": Case(nn.split, dict(model=LIN)),
    "nn.combine": Case(nn.combine, dict(trainable=nn.split(LIN)[0], frozen=nn.split(LIN)[1])),
    "nn.count_params": Case(nn.count_params, dict(model=LIN)),
    "nn.train": Case(
        nn.train,
        heavy=True,
        kwargs=dict(
            model=LIN,
            loss_fn=_mse,
            batches=[BATCH] * 3,
            optimizer=SGD,
            steps=3,
            key=KEY,
            progress=False,
        ),
    ),
    "nn.make_step": Case(nn.make_step, dict(loss_fn=_mse, optimizer=SGD)),
    "nn.fit": Case(
        nn.fit,
        heavy=True,
        kwargs=dict(
            loss_fn=lambda m, _: _mse(m, BATCH),
            optimizer=SGD,
            trainable=nn.split(LIN)[0],
            xs=None,
            frozen=nn.split(LIN)[1],
            length=3,
        ),
    ),
    "nn.evaluate": Case(
        nn.evaluate, heavy=True, kwargs=dict(model=LIN, loss_fn=_mse, batches=[BATCH])
    ),
    "nn.save": Case(_save, dict(path="/tmp/_bad_input_nn.eqx", tree=LIN)),
    "nn.load": Case(nn.load, dict(path="/tmp/_bad_input_nn.eqx", like=LIN)),
    "nn.lm_loss": Case(nn.lm_loss, heavy=True, kwargs=dict(model=LM, batch=TOK)),
    "nn.cross_entropy": Case(nn.cross_entropy, dict(logits=LOGITS, targets=TARGETS)),
    "nn.MarkovCorpus": Case(nn.MarkovCorpus, dict(P=P3)),
    "nn.quant.round_to": Case(Q.round_to, dict(x=XQ)),
    "nn.quant.quantize_blocks": Case(Q.quantize_blocks, dict(x=XQ)),
    "nn.quant.quantize": Case(Q.quantize, dict(x=XQ, rounding="stochastic", key=KEY)),
    "nn.quant.BlockFormat": Case(Q.BlockFormat, {}),
    "nn.quant.Operand": Case(Q.Operand, {}),
    "nn.quant.QuantMatmul": Case(Q.QuantMatmul, {}),
    "nn.quant.sr_variance": Case(Q.sr_variance, dict(x=XQ)),
    "nn.quant.rounding_uniform": Case(Q.rounding_uniform, dict(shape=(4,), key=KEY)),
    "nn.riemannian.sym": Case(R.sym, dict(a=S2)),
    "nn.riemannian.skew": Case(R.skew, dict(a=S2)),
    "nn.riemannian.project_tangent": Case(R.project_tangent, dict(x=Q64, v=V62)),
    "nn.riemannian.retract_qr": Case(R.retract_qr, dict(x=Q64, v=V62)),
    "nn.riemannian.retract_polar": Case(R.retract_polar, dict(x=Q64, v=V62)),
    "nn.riemannian.retract_cayley": Case(R.retract_cayley, dict(x=Q64, v=V62)),
    "nn.riemannian.landing_field": Case(R.landing_field, dict(x=Q64, g=V62, lam=1.0)),
    "nn.riemannian.feasibility": Case(R.feasibility, dict(x=Q64)),
    "nn.riemannian.stiefel_retraction": Case(R.stiefel_retraction, {}),
    "nn.riemannian.landing": Case(R.landing, {}),
    "nn.riemannian.random_stiefel": Case(R.random_stiefel, dict(p=6, r=2, key=KEY)),
    "nn.hopfield.hidden_update": Case(HF.hidden_update, dict(h_prev=H33, s=H33, alpha_prime=0.5)),
    "nn.hopfield.hopfield_attention": Case(
        HF.hopfield_attention, dict(q=QH, k=QH, v=QH, alpha_prime=0.5, q_offset=0)
    ),
    "nn.hopfield.HopfieldAttention": Case(
        HF.HopfieldAttention, dict(d_model=8, num_heads=2, alpha_prime=0.5, key=KEY)
    ),
    "nn.hopfield.HopfieldBlock": Case(
        HF.HopfieldBlock, dict(d_model=8, num_heads=2, alpha_prime=0.5, key=KEY)
    ),
    "nn.hopfield.hopfield_block": Case(HF.hopfield_block, dict(alpha_prime=0.5, alpha=0.5)),
    "nn.hopfield.hopfield_lm": Case(
        HF.hopfield_lm,
        dict(
            vocab_size=8, d_model=8, num_heads=2, num_layers=1, max_len=8, alpha_prime=0.5, key=KEY
        ),
    ),
    "nn.hopfield.decode": Case(HF.decode, dict(lm=HLM, tokens=TOK), heavy=True),
    "nn.hopfield.HopfieldViT": Case(
        HF.HopfieldViT,
        dict(
            num_patches=4,
            patch_dim=4,
            num_classes=3,
            d_model=8,
            num_heads=2,
            num_layers=1,
            alpha_prime=0.5,
            key=KEY,
        ),
    ),
    "nn.hopfield.patchify": Case(HF.patchify, dict(images=IMG, patch=2)),
    "nn.mla.rope": Case(ML.rope, dict(x=QH, positions=np.arange(3))),
    "nn.mla.GQAttention": Case(
        ML.GQAttention, dict(d_model=8, num_heads=2, num_kv_heads=1, head_dim=4, key=KEY)
    ),
    "nn.mla.MLA": Case(
        ML.MLA,
        dict(d_model=8, num_heads=2, num_kv_heads=1, kv_rank=4, nope_dim=2, v_dim=4, key=KEY),
    ),
    "nn.mla.mla_decode": Case(ML.mla_decode, dict(layer=MLAL, x=X8), heavy=True),
    "nn.mla.svd_factor": Case(ML.svd_factor, dict(W=S2, rank=1)),
    "nn.mla.mla_from_gqa": Case(ML.mla_from_gqa, dict(gqa=GQA, kv_rank=4, rope_dim=2, key=KEY)),
    "nn.mamba2.ssd_scan": Case(M2.ssd_scan, dict(x=SX, dt=SDT, A=SA, B=SB, C=SB)),
    "nn.mamba2.ssd_chunked": Case(M2.ssd_chunked, dict(x=SX, dt=SDT, A=SA, B=SB, C=SB, chunk=2)),
    "nn.mamba2.Mamba2": Case(
        M2.Mamba2, dict(d_model=8, num_heads=2, num_kv_heads=1, head_dim=4, key=KEY)
    ),
    "nn.mamba2.mamba2_from_gqa": Case(M2.mamba2_from_gqa, dict(gqa=GQA, chunk=2, key=KEY)),
    "nn.hybrid.SwiGLU": Case(HY.SwiGLU, dict(d_model=8, hidden=8, key=KEY)),
    "nn.hybrid.HybridLM": Case(
        HY.HybridLM,
        dict(
            vocab_size=8,
            d_model=8,
            num_heads=2,
            num_kv_heads=1,
            head_dim=4,
            kinds=("gqa",),
            mlp_hidden=8,
            key=KEY,
        ),
    ),
    "nn.hybrid.hybrid_from_teacher": Case(
        HY.hybrid_from_teacher, dict(teacher=HLM2, kinds=("mla",), kv_rank=4, rope_dim=2, key=KEY)
    ),
    "nn.adapters.target_paths": Case(AD_.target_paths, dict(model=MLPB)),
    "nn.adapters.delta_weights": Case(AD_.delta_weights, dict(adapted=AD)),
    "nn.adapters.merge": Case(AD_.merge, dict(adapted=AD)),
    "nn.adapters.unload": Case(AD_.unload, dict(adapted=AD)),
    "nn.adapters.disabled": Case(AD_.disabled, dict(adapted=AD)),
    "nn.adapters.lora_scale": Case(AD_.lora_scale, dict(r=2, alpha=4.0)),
    "nn.adapters.polar_optimizer": Case(AD_.polar_optimizer, dict(inner=optax.adamw(0.01))),
    "nn.adapters.stiefel_mask": Case(AD_.stiefel_mask, dict(tree=ADP)),
    "nn.adapters.ravan_select_heads": Case(AD_.ravan_select_heads, dict(model=ADR, k=1, key=KEY)),
    "nn.adapters.tfb_bayesianize": Case(AD_.tfb_bayesianize, dict(adapted=AD, sigma=0.1)),
    "nn.adapters.ct_gap_bound": Case(AD_.ct_gap_bound, dict(beta=0.8, c=0.5)),
    "nn.adapters.ct_steer": Case(AD_.ct_steer, dict(model=MLPB, beta=0.8)),
    "nn.adapters.ct_trainable": Case(AD_.ct_trainable, dict(model=MLPB)),
    "nn.adapters.num_params": Case(AD_.num_params, dict(method="lora", shapes=[(4, 8)], r=2)),
    "nn.adapters.kaiming_uniform_bases": Case(
        AD_.kaiming_uniform_bases, dict(r=2, m_max=8, n_max=8, key=KEY)
    ),
    "nn.adapters.tfb_refactor": Case(AD_.tfb_refactor, dict(b=V62, a=S2)),
    "nn.adapters.project_transpose": Case(
        AD_.project_transpose, dict(g=np.ones(40), index=IDX, value=VAL, d=5)
    ),
    "nn.adapters.project": Case(AD_.project, dict(theta=np.arange(5.0), index=IDX, value=VAL)),
    "nn.adapters.topk_mixture_weights": Case(AD_.topk_mixture_weights, dict(logits=LOGITS, k=2)),
    "nn.adapters.ctu": Case(AD_.ctu, dict(x=XQ, beta=0.8)),
    "nn.adapters.householder_apply": Case(AD_.householder_apply, dict(u=S2, x=S2)),
    "nn.adapters.householder_matrix": Case(AD_.householder_matrix, dict(u=S2)),
    "nn.adapters.isometric_projection": Case(AD_.isometric_projection, dict(D=40, d=5)),
    "nn.adapters.read_header": Case(AD_.read_header, dict(path=ADAPTER_FILE)),
    "nn.adapters.expected_calibration_error": Case(
        AD_.expected_calibration_error, dict(probs=PROBS, labels=np.array([0, 1, 1]))
    ),
    "nn.adapters.stable_rank": Case(AD_.stable_rank, dict(m=S2)),
    "nn.adapters.inject": Case(AD_.inject, dict(model=MLPB, method="lora", key=KEY, r=2)),
    "nn.adapters.save_adapter": Case(AD_.save_adapter, dict(path="a.safetensors", adapted=AD)),
    "nn.adapters.load_adapter": Case(AD_.load_adapter, dict(path=ADAPTER_FILE, model=MLPB)),
    "nn.adapters.vera_projection": Case(
        AD_.vera_projection, dict(shapes=[(8, 8)], a=BASES[0], b=BASES[1])
    ),
    "nn.adapters.fedavg": Case(AD_.fedavg, dict(clients=[AD, AD])),
    "nn.adapters.ravan_aggregate": Case(AD_.ravan_aggregate, dict(clients=[ADR, ADR])),
    "nn.adapters.tfb_search_sigma": Case(
        AD_.tfb_search_sigma, dict(metric=lambda s: 1.0 - s, sigma_max=1.0, tol=0.1)
    ),
}

NOT_ENTRY_POINTS = {
    "nn.TrainResult": "result",
    "nn.adapters.AdapterLayer": "base class of the methods' layers",
    "nn.adapters.AdaptedLayer": "built by inject",
    "nn.adapters.Adapted": "built by inject",
    "nn.adapters.AdapterSpec": "built by inject",
    "nn.adapters.LoRALinear": "built by inject",
    "nn.adapters.PoLARLinear": "built by inject",
    "nn.adapters.ProjectedLoRALinear": "built by inject",
    "nn.adapters.UniLoRALinear": "built by inject",
    "nn.adapters.VeRALinear": "built by inject",
    "nn.adapters.TiedLoRALinear": "built by inject",
    "nn.adapters.VBLoRALinear": "built by inject",
    "nn.adapters.RavanLinear": "built by inject",
    "nn.adapters.MoORELinear": "built by inject",
    "nn.adapters.TFBLoRALinear": "built by tfb_bayesianize",
    "nn.adapters.TFBSearchResult": "result of tfb_search_sigma",
    "nn.adapters.CTActivation": "built by ct_steer",
    "nn.adapters.CTLinear": "built by ct_trainable",
    "nn.adapters.CTTrainable": "built by ct_trainable",
    "nn.quant.FloatFormat": "record of FORMATS",
    "nn.quant.BlockQuantized": "result of quantize_blocks",
    "nn.hybrid.HybridLayer": "record built by HybridLM (norm, mixer, norm, mlp)",
}

# Registered calls whose validation the exhaustive fuzz still fails (nn/adapters): kept out
# of the default draws and listed by the test below, so the gap is visible rather than silent.


# each paper's valid calls may live beside this module, in _cases_<paper>.py
_PAPER_CASES, _PAPER_NOT_ENTRY = case_files(__file__)
CASES |= _PAPER_CASES
NOT_ENTRY_POINTS |= _PAPER_NOT_ENTRY

(
    test_every_public_callable_has_a_valid_call,
    test_valid_call_is_finite,
    test_bad_input,
    test_bad_input_exhaustive,
) = make_tests("nn", CASES, NOT_ENTRY_POINTS, max_examples=250)


# --- classes of fixes from the hostile fuzz (issue 20) ----------------------------------------


def test_flags_and_options_are_checked_when_given_not_when_first_used():
    import pytest

    from nn import acavp as A

    x = jnp.ones((2, 16))  # block size 16 divides: `pad` was never read here
    with pytest.raises(TypeError, match="`pad` must be a bool"):
        Q.quantize(x, pad="no")  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`tensor_scale` must be a bool"):
        Q.BlockFormat(16, "e4m3", 1)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`mlp_residual` must be a bool"):
        HF.hopfield_block(alpha_prime=0.5, mlp_residual="no")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`init` must be one of"):
        HF.hopfield_block(alpha_prime=0.5, init="last")
    # no MLA or Mamba2 layer reads them, and yet they are checked
    with pytest.raises(TypeError, match="`rope_dim` must be an integer"):
        HY.HybridLM(8, 8, 2, 1, 4, ("gqa",), mlp_hidden=8, rope_dim=2.5, key=KEY)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`chunk` must be an integer"):
        HY.HybridLM(8, 8, 2, 1, 4, ("gqa",), mlp_hidden=8, chunk="16", key=KEY)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`a` must be square"):
        R.sym(np.ones((3, 2)))
    cnn = A.SmallCNN((2, 2), n_classes=3, key=KEY)
    with pytest.raises(TypeError, match="`label_map` must be"):
        A.Prompted(A.ACAVPPrompt((3, 8, 8)), cnn, [[0], [1, 2]])
    with pytest.raises(TypeError, match="`target` must be array-like"):
        A.frequency_label_map([0, 1], [[0], [1, 2]], 2, 3)


def test_adapter_helpers_name_a_bad_callable_model_or_overflowing_bound():
    import pytest
    from scipy import stats

    with pytest.raises(TypeError, match="`metric"):  # the distribution, not a function of sigma
        AD_.tfb_search_sigma(stats.norm, sigma_max=1.0, tol=0.1)  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`model` must be an equinox Module"):
        AD_.target_paths("mlp")
    with pytest.raises(TypeError, match="`adapted`"):  # at the call, before any `with`
        AD_.disabled("model")  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`beta` must exceed"):  # c / (beta e) overflows
        AD_.ct_gap_bound(5e-324, 0.5)
    assert AD_.ct_gap_bound(5e-324, 0.0) == pytest.approx(np.log(2))  # c = 0: no 1/beta term


def test_dnd_tokens_admit_nan_padding_but_not_infinities():
    import pytest

    from nn import dnd

    tok = np.ones((2, 3, 2, 2, 2))
    tok[0, 0, 0, 0, 0] = np.nan  # padding
    assert np.isfinite(np.asarray(dnd.criterion_weight(tok))).all()
    tok[1, 2, 1, 1, 1] = np.inf
    with pytest.raises(ValueError, match="`tokens` must be free of infinities"):
        dnd.criterion_weight(tok)
    with pytest.raises(ValueError, match="`tokens` must be free of infinities"):
        dnd.token_mask(tok[1, 2])
    with pytest.raises(ValueError, match="`target` must be free of infinities"):
        dnd.dnd_loss(np.zeros((2, 2, 2)), np.full((2, 2, 2), np.inf), np.ones(2))


def test_cross_entropy_names_ragged_targets():
    import pytest

    with pytest.raises(TypeError, match="`targets` must be array-like"):
        nn.cross_entropy(jnp.zeros((2, 4)), [[0], [1, 2]])


def test_load_refuses_a_like_that_leaves_the_file_unread(tmp_path):
    import pytest

    path = tmp_path / "lin.eqx"
    nn.save(path, LIN)
    assert np.array_equal(nn.load(path, LIN).weight, LIN.weight)
    for like in (None, "model", object()):
        with pytest.raises(ValueError, match=r"`like` must have the structure.*unread"):
            nn.load(path, like)


def test_layer_constructors_check_their_key():
    import pytest

    labels = [
        "nn.hopfield.HopfieldAttention",
        "nn.hopfield.HopfieldBlock",
        "nn.hopfield.HopfieldViT",
        "nn.mla.GQAttention",
        "nn.mla.MLA",
        "nn.mamba2.Mamba2",
        "nn.mamba2.mamba2_from_gqa",
        "nn.hybrid.SwiGLU",
        "nn.hybrid.HybridLM",
        "nn.hybrid.hybrid_from_teacher",
    ]
    for label in labels:
        case = CASES[label]
        for bad in (None, np.random.default_rng(0), jax.random.split(KEY, 3)):
            with pytest.raises((TypeError, ValueError), match="`key` must be a single JAX PRNG"):
                case.fn(**{**case.kwargs, "key": bad})


def test_set_matmul_needs_a_callable_and_a_linear():
    import pytest

    assert nn.set_matmul(LIN, None).matmul is None
    for bad in ("fp4", 3, object()):
        with pytest.raises(TypeError, match="`matmul` must be callable"):
            nn.set_matmul(LIN, bad)
    for model in (None, "model", np.ones(3), {"w": jnp.ones(2)}):
        with pytest.raises(ValueError, match="`model` must contain an nn.Linear"):
            nn.set_matmul(model, None)


# --- issue 50: the hostile fuzz of the nn helpers ----------------------------------------------


def test_model_arguments_refuse_none_strings_and_numbers():
    import pytest

    for bad in (None, "model", 3, 2.5):
        for f in (nn.count_params, nn.split, nn.trainable_mask):
            with pytest.raises(TypeError, match="`model` must be a pytree"):
                f(bad)
        with pytest.raises(TypeError, match="`tree` .* must be a pytree"):
            nn.save("/tmp/_bad_input_nn_none.eqx", bad)
    with pytest.raises(ValueError, match="`mask` must be a filter spec"):
        nn.split(LIN, [True])
    with pytest.raises(TypeError, match="`frozen` must be callable"):
        nn.trainable_mask(LIN, "embed")
    assert nn.count_params({"w": jnp.ones(3)}) == 3  # a plain pytree of arrays is a model


def test_hopfield_attention_needs_a_key_for_every_query():
    import math

    import pytest

    k2 = _g.standard_normal((1, 2, 2, 4))
    with pytest.raises(ValueError, match=r"`q` must have at most as many rows as `k`"):
        HF.hopfield_attention(QH, k2, k2, alpha_prime=0.5)  # 3 queries, 2 keys: a NaN row
    out, _ = HF.hopfield_attention(QH, k2, k2, alpha_prime=0.5, causal=False)
    assert np.isfinite(out).all()
    for bad in (-1, 3, 10):
        with pytest.raises(ValueError, match=r"`q_offset` must be an integer in \[0, 2\]"):
            HF.hopfield_attention(QH, QH, QH, alpha_prime=0.5, q_offset=bad)
    for bad in (0.5, math.inf, math.nan, "1", True):
        with pytest.raises(TypeError, match="`q_offset` must be an integer"):
            HF.hopfield_attention(QH, QH, QH, alpha_prime=0.5, q_offset=bad)
    out, _ = HF.hopfield_attention(QH, k2, k2, alpha_prime=0.5, q_offset=0)
    assert np.isfinite(out).all()


def test_fit_frozen_none_is_nothing_frozen_and_names_a_missing_half():
    import pytest

    def loss(m, _):
        return _mse(m, BATCH)

    w, _, losses = nn.fit(loss, SGD, LIN, frozen=None, length=2)  # the whole model trains
    assert np.isfinite(losses).all() and w.weight.shape == LIN.weight.shape
    trainable, frozen = nn.split(AD)
    X = jnp.ones((3, 8))
    with pytest.raises(TypeError, match="`frozen` is None, so `trainable` is the whole model"):
        nn.fit(lambda m, _: jnp.mean(m(X) ** 2), SGD, trainable, frozen=None, length=2)
    _, _, losses = nn.fit(lambda m, _: jnp.mean(m(X) ** 2), SGD, trainable, frozen=frozen, length=2)
    assert np.isfinite(losses).all()


def test_diverging_training_raises_numerical_error():
    import pytest

    from _core.validation import NumericalError

    huge = [(XR * 1e30, BATCH[1])] * 4
    with pytest.raises(NumericalError, match="the training loss is not finite"):
        nn.train(LIN, _mse, huge, optax.sgd(1e30), 4, key=KEY, progress=False)
    # fit, the primitive of jitted sweeps, returns a diverged run's NaN, as documented
    _, _, losses = nn.fit(lambda m, _: _mse(m, huge[0]), optax.sgd(1e30), LIN, length=4)
    assert not np.isfinite(losses).all()
    with pytest.raises(NumericalError, match="the mean of `loss_fn`"):
        nn.evaluate(LIN, lambda m, b, key=None: jnp.nan * _mse(m, b), [BATCH])


def test_adapters_refuse_a_repeated_name_and_invalid_calibration_input():
    import pytest

    with pytest.raises(ValueError, match="`names` must name each adapter once"):
        AD.set_active("default", "default")
    ece = AD_.expected_calibration_error
    with pytest.raises(ValueError, match=r"`labels` must lie in \[0, 1\]"):
        ece(PROBS, np.array([0, 1, 2]))  # class 2 of a 2-class problem
    with pytest.raises(ValueError, match="`probs` must have rows summing to 1"):
        ece(PROBS[:, :1], np.array([0, 0, 0]))
    # confidences 0.9, 0.6, 0.8, the second wrong: one bin each, or one bin of mean gap 0.1
    assert ece(PROBS, np.array([0, 1, 1]), bins=10) == pytest.approx((0.1 + 0.6 + 0.2) / 3)
    assert ece(PROBS, np.array([0, 1, 1]), bins=2) == pytest.approx(abs(2 / 3 - 2.3 / 3))


def test_causal_attention_is_self_attention_of_one_length():
    import pytest

    with pytest.raises(ValueError, match="`q`, `k`, `v` must have one shape"):
        nn.causal_attention(ATT[:, :, :1], ATT, ATT)  # T = 1 query row against 2 keys
    with pytest.raises(ValueError, match="`q`, `k`, `v` must have one shape"):
        nn.causal_attention(ATT, ATT, ATT[..., :2])


def test_quant_arguments_are_checked_when_given():
    import pytest

    with pytest.raises(TypeError, match="`key` must be a single JAX PRNG key"):
        Q.round_to(XQ, key="x")  # nearest rounding reads no key, and yet it is checked
    with pytest.raises(TypeError, match="`key` must be a single JAX PRNG key"):
        Q.quantize_blocks(XQ, key="x")
    with pytest.raises(ValueError, match="`axis` must be an integer in"):
        Q.quantize(XQ, "e2m1", axis=9)
    with pytest.raises(TypeError, match="`pad` must be a bool"):
        Q.quantize(XQ, "e2m1", pad="x")  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`fmt` must be"):
        Q.quantize_blocks(XQ, None)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`fmt` must be one of"):
        Q.quantize(XQ, "e5m2")
    with pytest.raises(TypeError, match="`fwd_x` must be an Operand or None"):
        Q.QuantMatmul(fwd_x="nvfp4")  # pyright: ignore[reportArgumentType]
    with pytest.raises(TypeError, match="`sr_grad` must be a bool"):
        Q.QuantMatmul.fqt(sr_grad="x")  # pyright: ignore[reportArgumentType]
    qm, W = Q.QuantMatmul.qaf(), np.ones((3, 32))
    with pytest.raises(TypeError, match="`x` must be array-like"):
        qm("x", W)
    with pytest.raises(ValueError, match="`w` must be finite"):
        qm(XQ, W * np.nan)
    with pytest.raises(TypeError, match="`key` must be a single JAX PRNG key"):
        qm(XQ, W, key="x")
    with pytest.raises(ValueError, match="`w` must be"):
        qm(np.float64(1.0), W)
    with pytest.raises(ValueError, match="`key` must be a single JAX PRNG key"):
        Q.QuantMatmul.fqt()(XQ, W)  # stochastic rounding needs one


def test_sizes_no_machine_holds_are_refused_before_allocating():
    import pytest

    with pytest.raises(ValueError, match="`shape` too large"):
        Q.rounding_uniform((10**12,), key=KEY)  # aborted the process inside XLA
    with pytest.raises(TypeError, match="`shape` must be an integer"):
        Q.rounding_uniform(None, key=KEY)  # pyright: ignore[reportArgumentType]
    with pytest.raises(ValueError, match="`in_features`, `out_features` too large"):
        nn.Linear(2**31, 2**31, key=KEY)
    with pytest.raises(ValueError, match="`d_model`, `num_heads`, `head_dim` too large"):
        nn.CausalSelfAttention(2**20, 2**4, key=KEY)
    with pytest.raises(ValueError, match="`num_embeddings`, `dim` too large"):
        nn.Embedding(2**31, 2**10, key=KEY)


def test_warp_and_dnd_loss_refuse_what_they_would_ignore():
    import pytest

    from nn import acavp as A
    from nn import dnd

    m = np.eye(3)
    m[2, 0] = 0.5  # a projective last row: the warp reads the 2 x 3 part only
    with pytest.raises(ValueError, match="`matrix` must be affine, last row"):
        A.warp_affine(IMG[:1], m)
    with pytest.raises(ValueError, match="`weight` must be >= 0"):
        dnd.dnd_loss(np.zeros((1, 1, 2)), np.zeros((1, 1, 2)), np.array([-1.0]))
    with pytest.raises(ValueError, match="`target` must hold at least one non-NaN entry"):
        dnd.dnd_loss(np.zeros((1, 1, 2)), np.full((1, 1, 2), np.nan), np.array([1.0]))


def test_retractions_of_a_rank_deficient_point_stay_on_the_manifold():
    dup = np.c_[Q64[:, :1], Q64[:, :1]]  # X + V of rank 1: the Gram-matrix forms gave NaN
    for x, v in ((Q64, -Q64), (np.zeros((6, 2)), np.zeros((6, 2))), (dup, np.zeros((6, 2)))):
        for retract in (R.retract_qr, R.retract_polar):
            y = np.asarray(retract(x, v))
            assert np.isfinite(y).all()
            np.testing.assert_allclose(y.T @ y, np.eye(2), atol=1e-10)
    # the fast path is untouched where it holds: a tangent step from a Stiefel point
    y = R.retract_qr(Q64, np.asarray(R.project_tangent(Q64, V62)))
    q, r = np.linalg.qr(Q64 + np.asarray(R.project_tangent(Q64, V62)))
    np.testing.assert_allclose(y, q * np.sign(np.diag(r)), atol=1e-12)
