"""TfIdfVectorizer (src/providers/cpu/nn/tfidf_vectorizer.cc) against onnxruntime: int32,
int64 and string inputs, 1-D and 2-D, TF / IDF / TFIDF with and without weights, n-gram
lengths 1 to 3, skip counts 0 to 5, pools whose lengths lie partly outside
[min_gram_length, max_gram_length], and seeded random rows drawn from the pool's tokens;
bad attributes and inputs get typed errors."""

import numpy as np
import pytest
from onnx import TensorProto, helper

import ortlite
from helpers import run_lite, run_ort

ELEM = {np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64,
        np.dtype(object): TensorProto.STRING}


def model(x, **attrs):
    node = helper.make_node("TfIdfVectorizer", ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", ELEM[x.dtype], list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def check(x, **attrs):
    m = model(x, **attrs)
    expected = run_ort(m, {"x": x})[0]
    got = run_lite(m, {"x": x})[0]
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    return got


# The onnx node cases' pool: unigrams 2 3 5 4, bigrams (5 6) (7 8) (6 7).
POOL = dict(ngram_counts=[0, 4], ngram_indexes=list(range(7)),
            pool_int64s=[2, 3, 5, 4, 5, 6, 7, 8, 6, 7])
ROWS = np.array([1, 1, 3, 3, 3, 7, 8, 6, 7, 5, 6, 8])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
@pytest.mark.parametrize("shape", [(12,), (2, 6)], ids=["1d", "2d"])
@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("grams,skip", [((1, 1), 0), ((2, 2), 0), ((1, 2), 0), ((2, 2), 5),
                                        ((1, 2), 5), ((1, 2), 1)])
@pytest.mark.parametrize("weights", [False, True], ids=["noweights", "weights"])
def test_int_pool(dtype, shape, mode, grams, skip, weights):
    attrs = dict(POOL, mode=mode, min_gram_length=grams[0], max_gram_length=grams[1],
                 max_skip_count=skip)
    if weights:
        attrs["weights"] = [0.5, 1.5, 2.0, 0.25, 3.0, 1.0, 0.75]
    check(ROWS.astype(dtype).reshape(shape), **attrs)


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
@pytest.mark.parametrize("skip", [0, 2])
def test_string_pool(mode, skip):
    # unigrams a b c; bigrams (a b) (b c) (c a); trigram (a b c)
    words = ["a", "b", "c", "a", "b", "c", "d", "a", "c", "b", "a", "b"]
    pool_strings = ["a", "b", "c", "a", "b", "b", "c", "c", "a", "a", "b", "c"]
    x = np.array(words, dtype=object).reshape(2, 6)
    check(x, mode=mode, min_gram_length=1, max_gram_length=3, max_skip_count=skip,
          ngram_counts=[0, 3, 9], ngram_indexes=[0, 1, 2, 3, 4, 5, 6],
          pool_strings=pool_strings, weights=[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])


@pytest.mark.parametrize("seed", range(6))
def test_random_rows_and_index_maps(seed):
    rng = np.random.default_rng(seed)
    uni = rng.choice(20, 6, replace=False)
    bi = rng.choice(20, (5, 2))
    tri = rng.choice(20, (3, 3))
    pool = np.concatenate([uni, bi.ravel(), tri.ravel()]).tolist()
    n = 6 + 5 + 3
    x = rng.choice(np.concatenate([uni, bi.ravel(), tri.ravel()]), (3, 17)).astype(np.int64)
    common = dict(min_gram_length=1 + seed % 2, max_gram_length=3, max_skip_count=seed % 4,
                  ngram_counts=[0, 6, 16], pool_int64s=pool)
    # Weighted: one weight per n-gram, the outputs a permutation of them.
    check(x, mode=["IDF", "TFIDF"][seed % 2], ngram_indexes=rng.permutation(n).tolist(),
          weights=rng.uniform(0.1, 2, n).astype(np.float32).tolist(), **common)
    # Counts into an output map with holes.
    check(x, mode="TF", ngram_indexes=rng.permutation(n + 3)[:n].tolist(), **common)


def test_lengths_outside_the_range_keep_their_numbers():
    """Bigrams only, from a pool with unigrams: the bigrams' outputs stay where
    ngram_indexes puts them; the unigram slots stay 0."""
    y = check(ROWS.astype(np.int64), **dict(POOL, mode="TF", min_gram_length=2, max_gram_length=2,
                                            max_skip_count=0))
    assert (y[:4] == 0).all() and y[4:].sum() > 0


def test_bad_attributes_and_inputs():
    x = ROWS.astype(np.int64)
    with pytest.raises(ortlite.InvalidGraph, match="mode"):
        run_lite(model(x, **dict(POOL, mode="BM25", min_gram_length=1, max_gram_length=2,
                                 max_skip_count=0)), {"x": x})
    with pytest.raises(ortlite.InvalidGraph, match="min_gram_length"):
        run_lite(model(x, **dict(POOL, mode="TF", min_gram_length=3, max_gram_length=2,
                                 max_skip_count=0)), {"x": x})
    with pytest.raises(ortlite.InvalidGraph, match="pool_int64s"):
        run_lite(model(x, mode="TF", min_gram_length=1, max_gram_length=1, max_skip_count=0,
                       ngram_counts=[0], ngram_indexes=[0]), {"x": x})
    with pytest.raises(ortlite.InvalidGraph, match="ngram_indexes"):
        run_lite(model(x, **dict(POOL, ngram_indexes=[0, 1], mode="TF", min_gram_length=1,
                                 max_gram_length=2, max_skip_count=0)), {"x": x})
    # Strings against an integer pool match nothing: zeros, as in onnxruntime.
    s = np.array(["a", "b"], dtype=object)
    y = check(s, **dict(POOL, mode="TF", min_gram_length=1, max_gram_length=2, max_skip_count=0))
    assert not y.any()
    x3 = ROWS.astype(np.int64).reshape(2, 2, 3)
    with pytest.raises(ortlite.InvalidArgument, match="shape"):
        run_lite(model(x3, **dict(POOL, mode="TF", min_gram_length=1, max_gram_length=2,
                                  max_skip_count=0)), {"x": x3})
