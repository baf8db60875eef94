"""com.microsoft RotaryEmbedding (src/providers/cpu/contrib/rotary_embedding.cc): one-node
models compared with onnxruntime's CPU kernel over the 3-D and 4-D input forms, both position
id forms, interleaved 0 / 1 and a partial rotary dimension; bad positions and shapes checked
for typed errors."""

import numpy as np
import pytest

import ortlite
from test_ops_contrib import F16, F32, check, lite_error, rnd

I64 = np.int64


def rope_cache(max_pos, half, dtype=F32):
    inv = 1.0 / (10000 ** (np.arange(half) / half))
    ang = np.arange(max_pos)[:, None] * inv[None, :]
    return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)


def rope_inputs(rng, x, pos, half, max_pos=32, dtype=F32):
    cos, sin = rope_cache(max_pos, half, dtype)
    return [("X", x.astype(dtype)), ("P", pos), ("C", cos), ("S", sin)]


@pytest.mark.parametrize("B,S,N,H", [(1, 1, 1, 8), (2, 5, 3, 16), (3, 7, 4, 64)])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("layout", ["bsd", "bnsh"])
@pytest.mark.parametrize("pos_form", ["offset", "ids"])
def test_rotary_embedding(B, S, N, H, interleaved, layout, pos_form):
    rng = np.random.default_rng(B * 100 + S)
    x = rnd(rng, B, S, N * H) if layout == "bsd" else rnd(rng, B, N, S, H)
    pos = (np.array([3], I64) if pos_form == "offset"
           else rng.integers(0, 32, (B, S)).astype(I64))
    check("RotaryEmbedding", rope_inputs(rng, x, pos, H // 2), attrs=dict(interleaved=interleaved))


@pytest.mark.parametrize("layout", ["bsd", "bnsh"])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("R", [4, 16, 32])
def test_rotary_embedding_partial(layout, interleaved, R):
    rng = np.random.default_rng(R)
    B, S, N, H = 2, 6, 3, 32
    x = rnd(rng, B, S, N * H) if layout == "bsd" else rnd(rng, B, N, S, H)
    pos = rng.integers(0, 32, (B, S)).astype(I64)
    check("RotaryEmbedding", rope_inputs(rng, x, pos, R // 2),
          attrs=dict(interleaved=interleaved, num_heads=N, rotary_embedding_dim=R))


def test_rotary_embedding_scalar_position_and_ignored_attributes():
    rng = np.random.default_rng(1)
    x = rnd(rng, 2, 4, 2 * 8)
    check("RotaryEmbedding", rope_inputs(rng, x, np.array(5, I64), 4),
          attrs=dict(scale=2.0, is_packed_batching=1, num_heads=2))


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("R", [0, 8])
def test_rotary_embedding_float16(interleaved, R):
    rng = np.random.default_rng(2)
    B, S, N, H = 2, 5, 2, 16
    x = rnd(rng, B, S, N * H)
    pos = rng.integers(0, 32, (B, S)).astype(I64)
    attrs = dict(interleaved=interleaved)
    if R:
        attrs.update(num_heads=N, rotary_embedding_dim=R)
    out = check("RotaryEmbedding", rope_inputs(rng, x, pos, (R or H) // 2, dtype=F16),
                attrs=attrs, rtol=2e-3, atol=2e-3)
    assert out[0].dtype == F16


def test_rotary_embedding_threads():
    rng = np.random.default_rng(3)
    x = rnd(rng, 4, 64, 8 * 64)
    pos = rng.integers(0, 128, (4, 64)).astype(I64)
    check("RotaryEmbedding", rope_inputs(rng, x, pos, 32, max_pos=128), threads=4)


@pytest.mark.parametrize("pos", [np.array([[0, 1, 32]], I64), np.array([[0, -1, 2]], I64),
                                 np.array([30], I64)])
def test_rotary_embedding_position_out_of_range(pos):
    rng = np.random.default_rng(4)
    e = lite_error("RotaryEmbedding", rope_inputs(rng, rnd(rng, 1, 3, 8), pos, 4))
    assert isinstance(e, ortlite.InvalidArgument)
    assert "position id" in str(e)


def test_rotary_embedding_bad_shapes():
    rng = np.random.default_rng(5)
    pos = np.array([0], I64)
    # cache width 3 is not head size 8 / 2
    e = lite_error("RotaryEmbedding", rope_inputs(rng, rnd(rng, 1, 3, 2, 8), pos, 3))
    assert isinstance(e, ortlite.InvalidArgument)
    # position_ids [B, S] of the wrong size
    e = lite_error("RotaryEmbedding", rope_inputs(rng, rnd(rng, 1, 3, 8), np.zeros((1, 2), I64), 4))
    assert isinstance(e, ortlite.InvalidArgument)
    # rotary_embedding_dim larger than the head
    e = lite_error("RotaryEmbedding", rope_inputs(rng, rnd(rng, 1, 3, 8), pos, 8),
                   attrs=dict(num_heads=2, rotary_embedding_dim=16))
    assert isinstance(e, ortlite.InvalidArgument)
    # rotary_embedding_dim without num_heads
    e = lite_error("RotaryEmbedding", rope_inputs(rng, rnd(rng, 1, 3, 8), pos, 2),
                   attrs=dict(rotary_embedding_dim=4))
    assert isinstance(e, ortlite.OrtliteError)
