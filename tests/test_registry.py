"""The kernel registry holds every operator the README promises, and docs/operators.md
is generated from it."""

import os
import subprocess
import sys

import pytest

import ortlite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The foundation's operator list, with the opset each was introduced at (when after 7).
REQUIRED = {
    "Add": 7, "Sub": 7, "Mul": 7, "Div": 7, "Pow": 7, "Neg": 7, "Abs": 7, "Sqrt": 7,
    "Exp": 7, "Log": 7, "Reciprocal": 7, "Floor": 7, "Ceil": 7, "Erf": 9, "Sin": 7,
    "Cos": 7, "Tanh": 7, "Sigmoid": 7, "Relu": 7, "LeakyRelu": 7, "Elu": 7, "Selu": 7,
    "PRelu": 7, "HardSigmoid": 7, "HardSwish": 14, "Gelu": 20, "Clip": 7, "Min": 7,
    "Max": 7, "Sum": 7, "Mean": 7, "Equal": 7, "Less": 7, "Greater": 7,
    "LessOrEqual": 12, "GreaterOrEqual": 12, "Not": 7, "And": 7, "Or": 7, "Xor": 7,
    "Where": 9, "IsNaN": 9, "MatMul": 7, "Gemm": 7, "Conv": 7, "MaxPool": 7,
    "AveragePool": 7, "GlobalAveragePool": 7, "GlobalMaxPool": 7,
    "BatchNormalization": 7, "LayerNormalization": 17, "InstanceNormalization": 7,
    "Softmax": 7, "LogSoftmax": 7, "Dropout": 7, "Reshape": 7, "Flatten": 7,
    "Transpose": 7, "Concat": 7, "Split": 7, "Slice": 7, "Gather": 7, "Squeeze": 7,
    "Unsqueeze": 7, "Shape": 7, "Size": 7, "Constant": 7, "ConstantOfShape": 9,
    "Cast": 7, "CastLike": 15, "Identity": 7, "Expand": 8, "Tile": 7, "Pad": 7,
    "Range": 11, "ReduceMean": 7, "ReduceSum": 7, "ReduceMax": 7, "ReduceMin": 7,
    "ReduceProd": 7, "ArgMax": 7, "ArgMin": 7,
}


def coverage():
    spans = {}
    for domain, op, since, until, provider in ortlite._ortlite._registered_ops():
        if domain == "" and provider == "CPUExecutionProvider":
            spans.setdefault(op, []).append((since, until))
    return spans


@pytest.mark.parametrize("op", sorted(REQUIRED))
def test_required_op_has_a_kernel_for_every_opset_from_its_introduction_to_23(op):
    spans = coverage().get(op)
    assert spans, f"{op} has no kernel"
    for opset in range(REQUIRED[op], 24):
        assert any(s <= opset <= u for s, u in spans), f"{op} has no kernel at opset {opset}"


@pytest.mark.skipif(bool(os.environ.get("ORTLITE_TEST_PATH")),
                    reason="checks the in-place build's registry (make test); a sanitizer run "
                           "tests another build")
def test_operators_doc_is_current():
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "gen_operators_doc.py"),
                           "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
