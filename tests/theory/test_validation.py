import numpy as np
import pytest

from _core.validation import as_array, check_choice, check_int, check_scalar


def test_messages_name_argument_requirement_and_value():
    with pytest.raises(ValueError, match=r"`X` must be 2-D; got shape \(3,\)"):
        as_array([1, 2, 3], "X", ndim=2)
    with pytest.raises(ValueError, match=r"`y` must have shape \(4, \*\); got shape \(3, 2\)"):
        as_array(np.ones((3, 2)), "y", shape=(4, None))
    with pytest.raises(ValueError, match="`a` must be finite; got 1 NaN"):
        as_array([1.0, np.nan], "a")
    with pytest.raises(ValueError, match=r"`eta` must lie in \(0, 2\); got 2.5"):
        check_scalar(2.5, "eta", lower=0, upper=2, closed="neither")
    with pytest.raises(TypeError, match="`lam` must be a real number"):
        check_scalar("x", "lam")
    with pytest.raises(TypeError, match="`T` must be an integer"):
        check_int(2.0, "T")
    with pytest.raises(ValueError, match=r"`T` must be an integer in \[1, inf\]; got 0"):
        check_int(0, "T", lower=1)
    with pytest.raises(ValueError, match="`split` must be one of 2, 3; got 4"):
        check_choice(4, "split", (2, 3))


def test_arrays_refuse_complex_text_objects_and_flags():
    import _core.validation as V

    for bad, kind in (
        ([1 + 2j], "complex"),
        (["1.0"], "string"),
        ([1, None], "object"),
        ([True, False], "boolean"),
    ):
        with pytest.raises(TypeError, match=f"`x` must hold real numbers; got an array of {kind}"):
            V.as_array(bad, "x")
    assert V.as_array([True], "m", allow_bool=True).tolist() == [1.0]
    with pytest.raises(ValueError, match=r"`b` must lie in \[0, 1\]; got 2 among its entries"):
        V.as_array([0.5, 2.0], "b", lower=0, upper=1)
    assert np.isinf(V.as_array([np.inf], "c", finite="nan")).all()
    with pytest.raises(ValueError, match="free of NaN"):
        V.as_array([np.nan], "c", finite="nan")


def test_scalars_ints_flags_and_choices_are_strict():
    import _core.validation as V

    with pytest.raises(ValueError, match="`s` must be representable as a float; got an integer"):
        check_scalar(10**400, "s")
    with pytest.raises(ValueError, match="`s` must be finite; got nan"):
        check_scalar(float("nan"), "s")
    with pytest.raises(TypeError, match="`s` must be a real number; got the boolean"):
        check_scalar(True, "s")
    assert check_scalar(np.float32(2.0), "s") == 2.0
    with pytest.raises(ValueError, match="`n` must fit in 64 bits"):
        check_int(10**30, "n")
    for bad in ("no", 0, 1, None):
        with pytest.raises(TypeError, match=r"`flag` must be a bool \(True or False\)"):
            V.check_bool(bad, "flag")
    assert V.check_bool(np.bool_(True), "flag") is True
    with pytest.raises(ValueError, match="`split` must be one of 2, 3; got 3.0"):
        check_choice(3.0, "split", (2, 3))
    with pytest.raises(ValueError, match="`f` must be one of 'a'; got True"):
        check_choice(True, "f", ("a",))


def test_rng_key_callables_transforms_paths_batches(tmp_path):
    import jax
    import optax

    import _core.validation as V

    assert isinstance(V.as_generator([7, 0]), np.random.Generator)
    for bad in ("seed", 1.5, object(), np.random.RandomState(0)):
        with pytest.raises(TypeError, match="`rng` must be None, a non-negative int seed"):
            V.as_generator(bad)
    with pytest.raises(ValueError, match=r"`rng` must be an integer in \[0, inf\]; got -1"):
        V.as_generator(-1)
    V.check_key(jax.random.key(0))
    V.check_key(jax.random.key_data(jax.random.key(0)))  # a raw uint32 key
    with pytest.raises(ValueError, match="batch of keys of shape"):
        V.check_key(jax.random.split(jax.random.key(0), 3))
    with pytest.raises(TypeError, match=r"`key` must be a single JAX PRNG key"):
        V.check_key(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="it is required here and got None"):
        V.check_key(None)
    with pytest.raises(TypeError, match="`optimizer` must be an optax GradientTransformation"):
        V.check_transform("adam", "optimizer")
    V.check_transform(optax.adam(1e-3), "optimizer")
    with pytest.raises(TypeError, match="`f` must be callable"):
        V.check_callable(3, "f")
    with pytest.raises(ValueError, match=r"`path` must be an existing file; got .* \(a directory"):
        V.as_path(tmp_path, "path", kind="file")
    with pytest.raises(ValueError, match="existing directory"):
        V.as_path(tmp_path / "a" / "b", "path", kind="parent")
    get = V.batch_source([1, 2])
    assert (get(0), get(1)) == (1, 2)
    with pytest.raises(ValueError, match="`batches` ran out at step 2"):
        get(2)


def test_memory_and_numerical_faults():
    import _core.validation as V

    with pytest.raises(ValueError, match="`n` too large: the matrix would take about"):
        V.check_memory(1e15, "`n`", what="the matrix")
    assert V.check_memory(10, "`n`") == 80
    with pytest.raises(V.NumericalError, match="the loss is not finite") as info:
        V.check_finite_result(np.array([1.0, np.nan]), "the loss", step=7)
    assert info.value.diagnostics == {"step": 7}
    assert issubclass(V.ConvergenceError, V.NumericalError)


def test_check_array_may_admit_nan_markers_but_never_infinities():
    from _core.validation import check_array

    marked = np.array([[1.0, np.nan], [2.0, 3.0]])
    assert check_array(marked, "tokens", finite="inf") is marked
    with pytest.raises(ValueError, match="`tokens` must be free of infinities.*got 1 infinite"):
        check_array(np.array([[1.0, np.inf], [np.nan, 0.0]]), "tokens", finite="inf")
    with pytest.raises(ValueError, match="`tokens` must be free of infinities"):
        check_array([[1.0, -np.inf]], "tokens", finite="inf")
    with pytest.raises(ValueError, match="`w` must have at least 2 axes"):  # lists too
        check_array([1.0, 2.0], "w", min_ndim=2)
