"""com.microsoft RotaryEmbedding (src/providers/cpu/contrib/rotary_embedding.cc) and
GroupQueryAttention (group_query_attention.cc): one-node models compared with onnxruntime's
CPU kernels over the 3-D and 4-D input forms, both position id forms, interleaved 0 / 1 and a
partial rotary dimension; GQA's past, rotary, attributes and its position_ids, attention_bias
and head_sink inputs; bad positions and shapes checked for typed errors."""

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


# ---- GroupQueryAttention ----------------------------------------------------------------

def gqa_inputs(rng, B, S, N, kvN, H, past_lens=None, P=0, packed=False, rotary_half=0,
               dtype=F32):
    """past_lens: per batch (None: a first prompt, S == total_sequence_length)."""
    if past_lens is None:
        seqlens = np.full(B, S - 1, np.int32)
        total = S
    else:
        seqlens = (np.asarray(past_lens) + S - 1).astype(np.int32)
        total = int(seqlens.max()) + 1
    if packed:
        inputs = [("q", rnd(rng, B, S, (N + 2 * kvN) * H, dtype=dtype)), ("k", None), ("v", None)]
    else:
        inputs = [("q", rnd(rng, B, S, N * H, dtype=dtype)),
                  ("k", rnd(rng, B, S, kvN * H, dtype=dtype)),
                  ("v", rnd(rng, B, S, kvN * H, dtype=dtype))]
    if P:
        inputs += [("pk", rnd(rng, B, kvN, P, H, dtype=dtype)),
                   ("pv", rnd(rng, B, kvN, P, H, dtype=dtype))]
    else:
        inputs += [("pk", None), ("pv", None)]
    inputs += [("seqlens_k", seqlens), ("total", np.array(total, np.int32))]
    if rotary_half:
        cos, sin = rope_cache(64, rotary_half, dtype)
        inputs += [("cos", cos), ("sin", sin)]
    return inputs


GQA_OUT = ("Y", "present_key", "present_value")


def check_gqa(inputs, attrs, **tol):
    return check("GroupQueryAttention", inputs, outputs=GQA_OUT, attrs=attrs, **(tol or {}))


@pytest.mark.parametrize("B,S,N,kvN,H", [(1, 1, 1, 1, 8), (2, 5, 4, 2, 16), (2, 7, 8, 1, 32),
                                         (3, 4, 6, 3, 64)])
@pytest.mark.parametrize("packed", [False, True])
def test_gqa_first_prompt(B, S, N, kvN, H, packed):
    rng = np.random.default_rng(S * 10 + N)
    check_gqa(gqa_inputs(rng, B, S, N, kvN, H, packed=packed),
              dict(num_heads=N, kv_num_heads=kvN))


@pytest.mark.parametrize("S", [1, 3])
@pytest.mark.parametrize("P", [6, 12])
@pytest.mark.parametrize("packed", [False, True])
def test_gqa_with_past(S, P, packed):
    # onnxruntime takes a batch of one when a prompt (S > 1) continues a past
    rng = np.random.default_rng(S + P)
    B, N, kvN, H = (3, 4, 2, 16) if S == 1 else (1, 4, 2, 16)
    past_lens = [P, P - 2, 1][:B]
    check_gqa(gqa_inputs(rng, B, S, N, kvN, H, past_lens, P, packed),
              dict(num_heads=N, kv_num_heads=kvN))


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("half", [16, 8])  # onnxruntime: a multiple of 8, at most H / 2
@pytest.mark.parametrize("past", ["none", "prompt", "token"])
def test_gqa_rotary(interleaved, half, past):
    rng = np.random.default_rng(half + interleaved)
    N, kvN, H = 4, 2, 32
    if past == "none":
        inputs = gqa_inputs(rng, 2, 4, N, kvN, H, rotary_half=half)
    elif past == "prompt":
        inputs = gqa_inputs(rng, 1, 4, N, kvN, H, [5], 8, rotary_half=half)
    else:
        inputs = gqa_inputs(rng, 3, 1, N, kvN, H, [5, 3, 8], 8, rotary_half=half)
    check_gqa(inputs, dict(num_heads=N, kv_num_heads=kvN, do_rotary=1,
                           rotary_interleaved=interleaved))


@pytest.mark.parametrize("attrs", [dict(local_window_size=2), dict(softcap=2.0),
                                   dict(scale=0.3), dict(smooth_softmax=1),
                                   dict(local_window_size=3, softcap=1.5)])
@pytest.mark.parametrize("past", [False, True])
def test_gqa_attributes(attrs, past):
    rng = np.random.default_rng(9)
    N, kvN, H = 4, 2, 8
    inputs = (gqa_inputs(rng, 1, 6, N, kvN, H, [4], 7) if past
              else gqa_inputs(rng, 2, 6, N, kvN, H))
    check_gqa(inputs, dict(attrs, num_heads=N, kv_num_heads=kvN))


@pytest.mark.parametrize("rotary", [0, 8])
@pytest.mark.parametrize("S,past_lens", [(1, [4, 2]), (3, [4]), (5, None)])
def test_gqa_float16(rotary, S, past_lens):
    rng = np.random.default_rng(10)
    N, kvN, H = 4, 2, 16
    B = len(past_lens) if past_lens else 2
    inputs = gqa_inputs(rng, B, S, N, kvN, H, past_lens, 6 if past_lens else 0,
                        rotary_half=rotary, dtype=F16)
    attrs = dict(num_heads=N, kv_num_heads=kvN, do_rotary=int(bool(rotary)))
    check_gqa(inputs, attrs, rtol=3e-3, atol=3e-3)


def test_gqa_threads():
    rng = np.random.default_rng(11)
    model_inputs = gqa_inputs(rng, 1, 32, 8, 2, 32, [40], 48)
    check("GroupQueryAttention", model_inputs, outputs=GQA_OUT,
          attrs=dict(num_heads=8, kv_num_heads=2), threads=4)


def test_gqa_bad_inputs():
    rng = np.random.default_rng(12)
    # seqlens_k past the past buffer
    inputs = gqa_inputs(rng, 1, 1, 2, 1, 8, [9], 4)
    e = lite_error("GroupQueryAttention", inputs, outputs=GQA_OUT,
                   attrs=dict(num_heads=2, kv_num_heads=1))
    assert isinstance(e, ortlite.InvalidArgument)
    # rotary positions past the cache
    inputs = gqa_inputs(rng, 1, 1, 2, 1, 8, [3], 4, rotary_half=4)
    inputs[-2] = ("cos", inputs[-2][1][:2])
    inputs[-1] = ("sin", inputs[-1][1][:2])
    e = lite_error("GroupQueryAttention", inputs, outputs=GQA_OUT,
                   attrs=dict(num_heads=2, kv_num_heads=1, do_rotary=1))
    assert isinstance(e, ortlite.InvalidArgument)
    # num_heads not a multiple of kv_num_heads
    e = lite_error("GroupQueryAttention", gqa_inputs(rng, 1, 2, 3, 2, 8), outputs=GQA_OUT,
                   attrs=dict(num_heads=3, kv_num_heads=2))
    assert isinstance(e, ortlite.OrtliteError)


def with_extra(inputs, rotary_half=0, **extra):
    """gqa_inputs plus the optional inputs 7-11 (cos / sin when rotary_half is 0 stay out)."""
    names = dict(inputs)
    out = list(inputs)
    if not rotary_half:
        out += [("cos", None), ("sin", None)]
    for name in ("position_ids", "attention_bias", "head_sink"):
        out.append((name, extra.get(name)))
    assert set(names) >= {"q", "seqlens_k"}
    return out


@pytest.mark.parametrize("bias_shape", ["full", "b1", "n1", "b1n1"])
@pytest.mark.parametrize("attrs", [dict(), dict(softcap=2.0), dict(local_window_size=2)])
@pytest.mark.parametrize("past", [None, "token", "prompt"])
def test_gqa_attention_bias(bias_shape, attrs, past):
    # Added after the softcap, before the softmax, over the keys each row attends to.
    rng = np.random.default_rng(13)
    N, kvN, H = 4, 2, 16
    if past is None:
        B, S, inputs = 2, 5, gqa_inputs(rng, 2, 5, N, kvN, H)
    elif past == "token":
        B, S, inputs = 3, 1, gqa_inputs(rng, 3, 1, N, kvN, H, [4, 2, 6], 8)
    else:
        B, S, inputs = 1, 3, gqa_inputs(rng, 1, 3, N, kvN, H, [5], 6)
    total = int(dict(inputs)["total"])
    shape = {"full": (B, N), "b1": (1, N), "n1": (B, 1), "b1n1": (1, 1)}[bias_shape]
    bias = rnd(rng, *shape, S, total) * 3
    check_gqa(with_extra(inputs, attention_bias=bias), dict(attrs, num_heads=N, kv_num_heads=kvN))


@pytest.mark.parametrize("smooth", [0, 1])
@pytest.mark.parametrize("past", [False, True])
def test_gqa_head_sink(smooth, past):
    # An exp(sink) term per head in each softmax denominator (it replaces smooth_softmax's 0).
    rng = np.random.default_rng(14)
    N, kvN, H = 4, 2, 16
    inputs = gqa_inputs(rng, 1, 4, N, kvN, H, [3], 5) if past else gqa_inputs(rng, 2, 6, N, kvN, H)
    sink = rnd(rng, N) * 2
    check_gqa(with_extra(inputs, head_sink=sink),
              dict(num_heads=N, kv_num_heads=kvN, smooth_softmax=smooth))


@pytest.mark.parametrize("past", ["none", "token", "prompt"])
@pytest.mark.parametrize("dtype", [F32, F16])
def test_gqa_position_ids(past, dtype):
    # Rotary positions from position_ids: a first prompt reads its first value (the start of
    # every batch's positions), later calls one position per batch and token.
    rng = np.random.default_rng(15)
    N, kvN, H, half = 4, 2, 32, 8
    if past == "none":
        B, S = 2, 4
        inputs = gqa_inputs(rng, B, S, N, kvN, H, rotary_half=half, dtype=dtype)
        pos = np.tile(np.arange(S, dtype=I64) + 7, (B, 1))
    elif past == "token":
        B, S = 3, 1
        inputs = gqa_inputs(rng, B, S, N, kvN, H, [5, 3, 8], 8, rotary_half=half, dtype=dtype)
        pos = np.array([[9], [2], [30]], I64)
    else:
        B, S = 1, 3
        inputs = gqa_inputs(rng, B, S, N, kvN, H, [5], 6, rotary_half=half, dtype=dtype)
        pos = np.array([[11, 12, 20]], I64)
    tol = dict(rtol=3e-3, atol=3e-3) if dtype == F16 else {}
    check_gqa(with_extra(inputs, rotary_half=half, position_ids=pos),
              dict(num_heads=N, kv_num_heads=kvN, do_rotary=1), **tol)


def test_gqa_extra_inputs_bad_shapes():
    rng = np.random.default_rng(16)
    N, kvN, H = 4, 2, 16
    attrs = dict(num_heads=N, kv_num_heads=kvN)
    base = gqa_inputs(rng, 2, 3, N, kvN, H)
    for extra, match in [(dict(attention_bias=rnd(rng, 2, N, 3, 4)), "attention_bias"),
                         (dict(attention_bias=rnd(rng, 3, N, 3, 3)), "attention_bias"),
                         (dict(head_sink=rnd(rng, N + 1)), "head_sink"),
                         (dict(position_ids=np.zeros((2, 2), I64)), "position_ids"),
                         (dict(position_ids=np.zeros((2, 3), np.int32)), "position_ids")]:
        e = lite_error("GroupQueryAttention", with_extra(base, **extra), outputs=GQA_OUT,
                       attrs=attrs)
        assert isinstance(e, ortlite.OrtliteError) and match in str(e), str(e)
    # A position past the cos / sin cache.
    inputs = gqa_inputs(rng, 1, 1, N, kvN, 32, [3], 4, rotary_half=8)
    e = lite_error("GroupQueryAttention",
                   with_extra(inputs, rotary_half=8, position_ids=np.array([[64]], I64)),
                   outputs=GQA_OUT, attrs=dict(attrs, do_rotary=1))
    assert isinstance(e, ortlite.InvalidArgument) and "position 64" in str(e)
