"""Nesting limits at load and at run: model-local function call chains, subgraphs nested
in subgraphs (If, Loop), TypeProto nesting and subgraphs nested inside function bodies.

Each model is written as raw protobuf bytes, from the inside out in one pass (a
10^5-deep nesting is ~10 MB; onnx.helper would recurse as deep), and loaded and run in a
subprocess, on the main thread and on a thread with a 1 MiB stack: within the limit (64)
the model loads and returns X unchanged, beyond it loading raises the exact typed ortlite
error; it never crashes."""

import subprocess
import sys
import textwrap

import pytest

from helpers.pb_encode import key, ln, varint, vint

LIMIT = 64
DEPTHS = [10, 64, 65, 1000, 10**4, 10**5]

# Field numbers (onnx/onnx.proto).
M_IR, M_GRAPH, M_OPSET, M_FUNCTIONS = 1, 7, 8, 25
G_NODE, G_NAME, G_INPUT, G_OUTPUT = 1, 2, 11, 12
N_INPUT, N_OUTPUT, N_NAME, N_OP, N_ATTR, N_DOMAIN = 1, 2, 3, 4, 5, 7
A_NAME, A_G, A_TYPE = 1, 6, 20
ATTR_GRAPH = 5
VI_NAME, VI_TYPE = 1, 2
TP_TENSOR, TP_SEQUENCE, TP_OPTIONAL = 1, 4, 9
F_NAME, F_INPUT, F_OUTPUT, F_NODE, F_OPSET, F_DOMAIN = 1, 4, 5, 7, 9, 10
FLOAT, BOOL = 1, 9


def nest(layers, core):
    """The bytes of messages nested in one another: layers[0] is the outermost. Each layer
    is (head, field, tail): its message is head + ln(field, <the next layer>) + tail; the
    innermost holds `core`. Lengths are computed from the inside out, then the bytes are
    written in one pass (no quadratic copying)."""
    lengths = [0] * len(layers)
    inner = len(core)
    for i in range(len(layers) - 1, -1, -1):
        head, field, tail = layers[i]
        lengths[i] = inner
        inner = len(head) + len(key(field, 2)) + len(varint(inner)) + inner + len(tail)
    parts = []
    for (head, field, _), n in zip(layers, lengths):
        parts += [head, key(field, 2), varint(n)]
    parts.append(core)
    parts += [tail for (_, _, tail) in reversed(layers)]
    return b"".join(parts)


def tensor_type(elem):
    return ln(TP_TENSOR, vint(1, elem))


def value_info(name, elem=FLOAT):
    return ln(VI_NAME, name) + ln(VI_TYPE, tensor_type(elem))


def node(op, inputs, outputs, domain="", attrs=b""):
    b = b"".join(ln(N_INPUT, i) for i in inputs) + b"".join(ln(N_OUTPUT, o) for o in outputs)
    b += ln(N_OP, op) + attrs
    return b + (ln(N_DOMAIN, domain) if domain else b"")


def graph_attr_head(name):
    return ln(A_NAME, name) + vint(A_TYPE, ATTR_GRAPH)


def graph_attr(name, graph):
    return ln(N_ATTR, graph_attr_head(name) + ln(A_G, graph))


def identity_graph(x, y):
    return ln(G_NODE, node("Identity", [x], [y])) + ln(G_OUTPUT, value_info(y))


def opsets(local=False):
    b = ln(M_OPSET, vint(2, 17))
    return b + (ln(M_OPSET, ln(1, "local") + vint(2, 1)) if local else b"")


def model(graph_layers, graph_core):
    """A model whose graph is nest(graph_layers, graph_core); inputs X (float [2]) and C
    (bool scalar), output Y."""
    main_head = ln(G_NAME, "g") + ln(G_INPUT, value_info("X")) + ln(G_INPUT, value_info("C", BOOL))
    main_tail = ln(G_OUTPUT, value_info("Y"))
    layers = [(vint(M_IR, 8), M_GRAPH, opsets())] + graph_layers
    # The main graph is the second layer: its head and tail wrap the first node.
    head, field, tail = layers[1]
    layers[1] = (main_head + head, field, tail + main_tail)
    return nest(layers, graph_core)


def if_layers(depth, x, c, prefix):
    """Layers of `depth` nested If nodes, each in the then_branch of the one above, the first
    one a node of the enclosing graph (its outer layer: (b"", G_NODE, b"")). The innermost
    then_branch holds identity_graph(x, <its output>). Output of the first If: prefix0."""
    layers = []
    for k in range(depth):
        out = f"{prefix}{k}"
        if k > 0:  # graph k (then_branch of If k-1) holds If k and returns its output
            layers.append((b"", G_NODE, ln(G_OUTPUT, value_info(out))))
        else:
            layers.append((b"", G_NODE, b""))
        head = ln(N_INPUT, c) + ln(N_OUTPUT, out) + ln(N_OP, "If")
        tail = graph_attr("else_branch", identity_graph(x, f"{prefix}e{k}"))
        layers.append((head, N_ATTR, tail))
        layers.append((graph_attr_head("then_branch"), A_G, b""))
    return layers, identity_graph(x, f"{prefix}{depth}")


def model_if(depth):
    layers, core = if_layers(depth, "X", "C", "y")
    m = model(layers, core)
    # Y = Identity(y0): appended as a second graph field (protobuf merges it).
    return m + ln(M_GRAPH, ln(G_NODE, node("Identity", ["y0"], ["Y"])))


def model_loop(depth):
    """`depth` nested Loops (M = 1 trip, no cond), each carrying one value through the body of
    the one above."""
    layers = []
    for k in range(depth):
        x_in = "X" if k == 0 else f"x{k}"
        out = "Y" if k == 0 else f"l{k}"
        if k > 0:  # body k-1: inputs i, c, x{k}; outputs c_out, l{k}
            head = (ln(G_INPUT, value_info(f"i{k}", 7)) + ln(G_INPUT, value_info(f"c{k}", BOOL)) +
                    ln(G_INPUT, value_info(x_in)) +
                    ln(G_NODE, node("Identity", [f"c{k}"], [f"co{k}"])))
            tail = ln(G_OUTPUT, value_info(f"co{k}", BOOL)) + ln(G_OUTPUT, value_info(out))
            layers.append((head, G_NODE, tail))
        else:
            layers.append((ln(G_NODE, node("Constant", [], ["M"], attrs=ln(
                N_ATTR, ln(A_NAME, "value") + vint(A_TYPE, 4) + ln(
                    5, vint(2, 7) + ln(8, "m") + ln(9, (1).to_bytes(8, "little")))))),
                G_NODE, b""))
        head = ln(N_INPUT, "M") + ln(N_INPUT, "") + ln(N_INPUT, x_in) + ln(N_OUTPUT, out)
        head += ln(N_OP, "Loop")
        layers.append((head, N_ATTR, b""))
        layers.append((graph_attr_head("body"), A_G, b""))
    k = depth
    core = (ln(G_INPUT, value_info(f"i{k}", 7)) + ln(G_INPUT, value_info(f"c{k}", BOOL)) +
            ln(G_INPUT, value_info(f"x{k}")) +
            ln(G_NODE, node("Identity", [f"c{k}"], [f"co{k}"])) +
            ln(G_NODE, node("Identity", [f"x{k}"], [f"l{k}"])) +
            ln(G_OUTPUT, value_info(f"co{k}", BOOL)) + ln(G_OUTPUT, value_info(f"l{k}")))
    return model(layers, core)


def function(name, inputs, outputs, nodes):
    b = ln(F_NAME, name) + ln(F_DOMAIN, "local")
    b += b"".join(ln(F_INPUT, i) for i in inputs) + b"".join(ln(F_OUTPUT, o) for o in outputs)
    b += b"".join(ln(F_NODE, n) for n in nodes)
    return b + ln(F_OPSET, vint(2, 17)) + ln(F_OPSET, ln(1, "local") + vint(2, 1))


def model_calls(depth):
    """f0 calls f1 ... f(depth-1) calls Identity."""
    fns = []
    for i in range(depth):
        callee = node(f"f{i + 1}", ["x"], ["y"], domain="local") if i + 1 < depth else node(
            "Identity", ["x"], ["y"])
        fns.append(ln(M_FUNCTIONS, function(f"f{i}", ["x"], ["y"], [callee])))
    return _flat_model(ln(G_NODE, node("f0", ["X"], ["Y"], domain="local")), b"".join(fns))


def _flat_model(graph_nodes, functions):
    main = (ln(G_NAME, "g") + ln(G_INPUT, value_info("X")) + ln(G_INPUT, value_info("C", BOOL)) +
            graph_nodes + ln(G_OUTPUT, value_info("Y")))
    return vint(M_IR, 8) + ln(M_GRAPH, main) + opsets(True) + functions


def model_calls_through_if(depth):
    """f_i's body is If(c) whose then_branch calls f_{i+1}: call depth `depth`, and as deep a
    nesting of subgraphs once the calls are inlined."""
    fns = []
    for i in range(depth):
        if i + 1 < depth:
            then = (ln(G_NODE, node(f"f{i + 1}", ["x", "c"], [f"t{i}"], domain="local")) +
                    ln(G_OUTPUT, value_info(f"t{i}")))
            body = node("If", ["c"], ["y"], attrs=graph_attr("then_branch", then) +
                        graph_attr("else_branch", identity_graph("x", f"e{i}")))
        else:
            body = node("Identity", ["x"], ["y"])
        fns.append(ln(M_FUNCTIONS, function(f"f{i}", ["x", "c"], ["y"], [body])))
    return _flat_model(ln(G_NODE, node("f0", ["X", "C"], ["Y"], domain="local")), b"".join(fns))


def model_function_graphs(depth):
    """A function whose body is `depth` nested Ifs; the graph calls it once."""
    layers, core = if_layers(depth, "x", "c", "fy")
    fn_head = ln(F_NAME, "f") + ln(F_DOMAIN, "local") + ln(F_INPUT, "x") + ln(F_INPUT, "c")
    fn_tail = (ln(F_NODE, node("Identity", ["fy0"], ["y"])) + ln(F_OUTPUT, "y") +
               ln(F_OPSET, vint(2, 17)))
    # The body's first If is a function node (field 7), not a graph node.
    layers[0] = (fn_head, F_NODE, fn_tail)
    fn = nest(layers, core)
    return _flat_model(ln(G_NODE, node("f", ["X", "C"], ["Y"], domain="local")),
                       ln(M_FUNCTIONS, fn))


def model_type(depth, field=TP_SEQUENCE):
    """Input S of type seq(seq(...seq(tensor(float)))) with `depth` sequence levels (or
    optional(...) with field=TP_OPTIONAL)."""
    layers = []
    for _ in range(depth):
        layers.append((b"", field, b""))  # TypeProto.sequence_type / optional_type
        layers.append((b"", 1, b""))  # Sequence.elem_type / Optional.elem_type
    s_type = nest(layers, tensor_type(FLOAT))
    main = (ln(G_NAME, "g") + ln(G_INPUT, value_info("X")) + ln(G_INPUT, value_info("C", BOOL)) +
            ln(G_INPUT, ln(VI_NAME, "S") + ln(VI_TYPE, s_type)) +
            ln(G_NODE, node("Identity", ["X"], ["Y"])) + ln(G_OUTPUT, value_info("Y")))
    return vint(M_IR, 8) + ln(M_GRAPH, main) + opsets()


# kind -> (builder, exact error class beyond the limit, message substring)
KINDS = {
    "calls": (model_calls, "NotImplemented", "model-local function call depth"),
    "calls_through_if": (model_calls_through_if, "NotImplemented",
                         "model-local function call depth"),
    "if": (model_if, "InvalidProtobuf", "subgraphs nested deeper than 64"),
    "loop": (model_loop, "InvalidProtobuf", "subgraphs nested deeper than 64"),
    "function_graphs": (model_function_graphs, "InvalidProtobuf",
                        "subgraphs nested deeper than 64"),
    "type": (model_type, "InvalidProtobuf", "TypeProto nested deeper than 64"),
    "optional_type": (lambda d: model_type(d, TP_OPTIONAL), "InvalidProtobuf",
                      "TypeProto nested deeper than 64"),
}

RUNNER = textwrap.dedent("""
    import sys, threading
    import numpy as np
    import ortlite
    path, where = sys.argv[1], sys.argv[2]
    def body():
        x = np.array([1.5, -2.0], np.float32)
        feeds = {"X": x, "C": np.array(True)}
        try:
            sess = ortlite.InferenceSession(path)
            for i in sess.get_inputs():
                if i.name == "S":  # seq(seq(...)) or optional(optional(...))
                    depth = i.type.count("(") - 1
                    outer = i.type[:i.type.index("(") + 1]
                    assert i.type == outer * depth + "tensor(float)" + ")" * depth, i.type
                    feeds["S"] = [] if i.type.startswith("seq") else None
            (y,) = sess.run(["Y"], feeds)
        except ortlite.OrtliteError as e:
            print("ERR", type(e).__name__, str(e)[:2000])
            return
        assert y.dtype == np.float32 and y.tolist() == x.tolist(), y
        print("OK")
    if where == "thread":
        threading.stack_size(1 << 20)
        t = threading.Thread(target=body)
        t.start()
        t.join()
    else:
        body()
""")


def run_model_file(path, where, timeout=120):
    r = subprocess.run([sys.executable, "-c", RUNNER, str(path), where], capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    return r.stdout.strip()


_built = {}


def model_file(tmp_path_factory, kind, depth):
    if (kind, depth) not in _built:
        path = tmp_path_factory.mktemp("nesting") / f"{kind}_{depth}.onnx"
        path.write_bytes(KINDS[kind][0](depth))
        _built[(kind, depth)] = path
    return _built[(kind, depth)]


@pytest.mark.parametrize("where", ["main", "thread"])
@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("kind", list(KINDS))
def test_nesting_limit(tmp_path_factory, kind, depth, where):
    out = run_model_file(model_file(tmp_path_factory, kind, depth), where)
    if depth <= LIMIT:
        assert out == "OK", out
    else:
        _, error, text = KINDS[kind]
        assert out.startswith(f"ERR {error} "), out
        assert text in out, out
        assert "limit of 64" in out or "deeper than 64" in out, out


# ---------------------------------------------------------------------------------------
# Subgraph depth once model-local functions are inlined: the reader bounds each graph and
# each function body on its own; the inliner bounds what they make together.

def nested_if_graph(depth, x, c, prefix):
    """A GraphProto returning {prefix}0 = x through `depth` nested Ifs."""
    layers, core = if_layers(depth, x, c, prefix)
    layers[0] = (ln(G_NAME, prefix), G_NODE, ln(G_OUTPUT, value_info(f"{prefix}0")))
    return nest(layers, core)


def then_else(then, x, k):
    return graph_attr("then_branch", then) + graph_attr("else_branch", identity_graph(x, f"e{k}"))


def expect_ok_or_too_deep(path, ok, error_start):
    """Loads and runs `path` on the main thread and in a 1 MiB-stack thread."""
    for where in ("main", "thread"):
        out = run_model_file(path, where)
        if ok:
            assert out == "OK", out
        else:
            assert out.startswith(error_start), out
            assert "subgraphs nest 65 deep, which exceeds the limit of 64" in out, out


@pytest.mark.parametrize("depth,ok", [(63, True), (64, False)])
def test_inlined_function_nests_subgraphs_under_its_call(tmp_path, depth, ok):
    # f's body is `depth` nested Ifs. The graph calls f at its top (depth + 0: within the
    # limit) and again inside an If's then_branch (depth + 1), which reuses the first
    # call's memoized depth.
    layers, core = if_layers(depth, "x", "c", "fy")
    layers[0] = (ln(F_NAME, "f") + ln(F_DOMAIN, "local") + ln(F_INPUT, "x") + ln(F_INPUT, "c"),
                 F_NODE, ln(F_OUTPUT, "fy0") + ln(F_OPSET, vint(2, 17)))
    f = nest(layers, core)
    then = ln(G_NODE, node("f", ["X", "C"], ["t"], domain="local")) + ln(G_OUTPUT, value_info("t"))
    nodes = [node("f", ["X", "C"], ["Y0"], domain="local"),
             node("If", ["C"], ["Y1"], attrs=then_else(then, "X", 0)),
             node("Add", ["Y0", "Y1"], ["Y2"]),
             node("Sub", ["Y2", "Y0"], ["Y"])]
    path = tmp_path / "m.onnx"
    path.write_bytes(_flat_model(b"".join(ln(G_NODE, n) for n in nodes), ln(M_FUNCTIONS, f)))
    expect_ok_or_too_deep(path, ok, "ERR NotImplemented f node (outputs: t): ")


@pytest.mark.parametrize("depth,ok", [(62, True), (63, False)])
def test_referenced_graph_attribute_nests_under_the_reference(tmp_path, depth, ok):
    # f takes a graph attribute and uses it (ref_attr_name) as the then_branch of an If in a
    # then_branch of its body: the caller's graph (depth nested Ifs, within the reader's
    # bound) ends up 2 levels deeper than where it was written.
    ref = ln(N_ATTR, ln(A_NAME, "then_branch") + ln(21, "body") + vint(A_TYPE, ATTR_GRAPH))
    inner_if = node("If", ["c"], ["i"], attrs=ref + graph_attr(
        "else_branch", identity_graph("x", "e1")))
    outer_then = ln(G_NODE, inner_if) + ln(G_OUTPUT, value_info("i"))
    body = node("If", ["c"], ["y"], attrs=then_else(outer_then, "x", 0))
    f = function("f", ["x", "c"], ["y"], [body]) + ln(6, "body")
    arg = nested_if_graph(depth, "X", "C", "b")
    call = node("f", ["X", "C"], ["Y"], domain="local", attrs=graph_attr("body", arg))
    path = tmp_path / "m.onnx"
    path.write_bytes(_flat_model(ln(G_NODE, call), ln(M_FUNCTIONS, f)))
    expect_ok_or_too_deep(path, ok, "ERR NotImplemented If node (outputs: b")
