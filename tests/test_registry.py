"""The kernel registry holds every operator the README promises, and docs/operators.md
is generated from it."""

import importlib.util
import os
import re
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


# ---- the source tree: every CPU kernel is findable by its op name ------------------------

SRC_CPU = os.path.join(ROOT, "src", "providers", "cpu")
OPEN_ENDED = 1 << 30  # kMaxOpset in include/ortlite/kernel.h
# A table line of a family's register.cc: "//   Op [(domain)]   file.cc".
TABLE_LINE = re.compile(r"^//   (\w+)(?: \(([\w.]+)\))?\s+(\w+\.(?:cc|h))$")
needs_source = pytest.mark.skipif(not os.path.isdir(SRC_CPU),
                                  reason="reads the source tree (src/ is not here)")


def cpu_registrations():
    return sorted({(domain, op) for domain, op, _, _, provider in
                   ortlite._ortlite._registered_ops() if provider == "CPUExecutionProvider"})


def cpu_families():
    """family -> (file names in src/providers/cpu/<family>, lines of its register.cc)."""
    families = {}
    for family in sorted(os.listdir(SRC_CPU)):
        folder = os.path.join(SRC_CPU, family)
        if not os.path.isdir(folder):
            continue
        register = os.path.join(folder, "register.cc")
        lines = open(register).read().splitlines() if os.path.exists(register) else []
        families[family] = (sorted(os.listdir(folder)), lines)
    return families


def names_op(path, op):
    with open(path) as f:
        return f'"{op}"' in f.read()


def kernel_files(op, families):
    """The files (family/file) that one grep of `op` finds: a file named for the op
    (NonMaxSuppression -> non_max_suppression.cc), or a file that the family's register.cc
    names on a line with the op. Only files that name the op as a string are counted."""
    found = []
    word = re.compile(rf"(?<![\w.]){re.escape(op)}(?!\w)")
    for family, (files, lines) in families.items():
        candidates = {f for f in files
                      if os.path.splitext(f)[0].replace("_", "") == op.lower()}
        for line in lines:
            if word.search(line):
                candidates.update(f for f in re.findall(r"\w+\.(?:cc|h)\b", line) if f in files)
        found += [f"{family}/{f}" for f in sorted(candidates)
                  if f != "register.cc" and names_op(os.path.join(SRC_CPU, family, f), op)]
    return found


@needs_source
def test_every_cpu_kernel_is_found_by_its_op_name_in_a_file_name_or_a_family_register_cc():
    families = cpu_families()
    missing = [f"{domain or 'ai.onnx'}.{op}" for domain, op in cpu_registrations()
               if not kernel_files(op, families)]
    assert not missing, ("no file under src/providers/cpu/<family>/ is named for these ops, nor "
                         "does the family's register.cc list them next to the file that "
                         f"registers them: {missing}")


@needs_source
def test_every_family_has_a_register_cc_whose_table_lists_only_registered_ops():
    registered = cpu_registrations()
    for family, (files, lines) in cpu_families().items():
        sources = [os.path.join(SRC_CPU, family, f) for f in files
                   if f.endswith(".cc") and f != "register.cc"]
        if not any(re.search(r"\br\.add(_versions)?\(", open(p).read()) for p in sources):
            continue  # registers nothing (shared helpers)
        assert "register.cc" in files, f"src/providers/cpu/{family} has no register.cc"
        rows = [TABLE_LINE.match(line) for line in lines]
        rows = [m for m in rows if m]
        assert rows, f"src/providers/cpu/{family}/register.cc has no op table"
        for m in rows:
            op, domain, file = m.group(1), m.group(2) or "", m.group(3)
            domain = "ai.onnx.ml" if family == "ml" and not domain else domain
            assert (domain, op) in registered, f"{family}/register.cc lists {op}, not registered"
            assert file in files, f"{family}/register.cc names {file}, which does not exist"
            assert names_op(os.path.join(SRC_CPU, family, file), op), \
                f"{family}/register.cc puts {op} in {file}, which does not name it"


# ---- NEWEST_OPSET ----------------------------------------------------------------------

def test_newest_opset_is_the_upper_bound_of_the_kernels_checked_up_to_it():
    import onnx.defs

    newest = ortlite.NEWEST_OPSET
    assert type(newest) is int
    regs = ortlite._ortlite._registered_ops()
    # The CUDA kernels implement the semantics up to NEWEST_OPSET and register no later opset.
    cuda = [until for domain, _, _, until, provider in regs
            if provider == "CUDAExecutionProvider" and domain == ""]
    if cuda:
        assert max(cuda) == newest
    # On the CPU, an op's last range is open-ended, ends at NEWEST_OPSET, or goes past it (an
    # op that also registers later versions); one ending earlier is an op ONNX removed.
    last = {}
    for domain, op, _, until, provider in regs:
        if provider == "CPUExecutionProvider" and domain == "":
            last[op] = max(last.get(op, 0), until)
    assert newest in last.values()
    for op, until in last.items():
        if until < newest:
            schema = onnx.defs.get_schema(op)
            assert schema.deprecated and until == schema.since_version - 1, (op, until)
    assert max(u for u in last.values() if u < OPEN_ENDED) >= newest


@needs_source
def test_newest_opset_is_kernel_h_constant():
    with open(os.path.join(ROOT, "include", "ortlite", "kernel.h")) as f:
        m = re.search(r"constexpr int kNewestOpset = (\d+);", f.read())
    assert m and int(m.group(1)) == ortlite.NEWEST_OPSET


def test_operators_doc_prints_plus_only_for_open_ended_ranges():
    spec = importlib.util.spec_from_file_location(
        "gen_operators_doc", os.path.join(ROOT, "tools", "gen_operators_doc.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    newest = ortlite.NEWEST_OPSET
    assert gen.format_span(12, OPEN_ENDED) == "12+"
    assert gen.format_span(12, newest) == f"12-{newest}"
    assert gen.format_span(newest, newest) == f"{newest}"
    open_ended = {}
    for domain, op, _, until, provider in ortlite._ortlite._registered_ops():
        key = (op, domain or "ai.onnx", provider.replace("ExecutionProvider", ""))
        open_ended[key] = open_ended.get(key, False) or until >= OPEN_ENDED
    rows = [line.split(" | ") for line in gen.render().splitlines() if line.startswith("| ")][1:]
    assert len(rows) == len(open_ended)
    for row in rows:
        key = (row[0][2:], row[1], row[2])
        assert ("+" in row[3]) == open_ended[key], row
