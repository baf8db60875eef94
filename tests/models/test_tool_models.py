"""Every model of tools/tool_models.CASES (what onnxruntime's quantize_dynamic, quantize_static
QDQ / QOperator, MatMulNBitsQuantizer, float16 converter and transformers optimizer write from
the seeded float MLP, CNN, LSTM, BERT encoder and GPT-2 decoder) loads in ortlite and matches
onnxruntime within the case's tolerance, at 1 and 2 threads; the variants contain the operators
the tools are known to write."""

import os
import sys

import numpy as np
import pytest
from onnx import helper

from helpers import run_lite, run_ort

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools"))

import tool_models  # noqa: E402

# Operators each variant must contain (the tool did what the case is named after).
EXPECTED_OPS = {
    "dynamic": {"MatMulInteger", "DynamicQuantizeLinear"},
    "dynamic_u8": {"ConvInteger", "DynamicQuantizeLinear"},
    "qdq": {"QuantizeLinear", "DequantizeLinear"},
    "qoperator": {"QLinearConv", "QLinearMatMul", "QGemm", "QLinearAdd"},
    "nbits": {"MatMulNBits"},
    "fp16": {"Cast"},
    "opt": {"Attention", "EmbedLayerNormalization", "SkipLayerNormalization", "BiasGelu"},
    "opt_dynamic": {"QAttention", "MatMulInteger", "DynamicQuantizeLinear", "FastGelu"},
    "opt_nbits": {"Attention", "MatMulNBits", "FastGelu"},
}
# GPT-2's optimizer fuses its tanh GELU (FastGelu) and its causal self-attention
# (Attention with unidirectional = 1).
EXPECTED_OPS_OF = {("gpt2", "opt"): {"Attention", "EmbedLayerNormalization",
                                     "SkipLayerNormalization", "FastGelu"}}


@pytest.mark.parametrize("case", tool_models.CASES, ids=[f"{c[0]}-{c[1]}" for c in tool_models.CASES])
def test_tool_model_matches_onnxruntime(case, tmp_path):
    fm, kind, rtol, atol = case
    model = tool_models.variant(kind, tool_models.FLOAT_MODELS[fm](), tmp_path)
    ops = {n.op_type for n in model.graph.node}
    want = EXPECTED_OPS_OF.get((fm, kind), EXPECTED_OPS[kind])
    assert ops & want if kind in ("dynamic", "qoperator") else want <= ops, sorted(ops)
    if fm == "gpt2":
        attn = [n for n in model.graph.node if n.op_type in ("Attention", "QAttention")]
        uni = [next((helper.get_attribute_value(a) for a in n.attribute
                     if a.name == "unidirectional"), 0) for n in attn]
        assert uni == ([1, 1] if "opt" in kind else []), uni
    feeds = tool_models.feeds(model)
    expected = run_ort(model, feeds)
    for threads in (1, 2):
        actual = run_lite(model, feeds, threads)
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            a, e = np.asarray(a), np.asarray(e)
            assert a.shape == e.shape and a.dtype == e.dtype
            scale = float(np.abs(e.astype(np.float64)).max())
            np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=rtol,
                                       atol=atol * scale)
