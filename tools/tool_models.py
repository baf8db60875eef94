"""Seeded float models and the variants onnxruntime's own tools write from them: dynamic and
static quantization (QDQ and QOperator), int4 weights (MatMulNBitsQuantizer), float16
(keep_io_types) and, for the BERT encoder and the GPT-2 decoder, the transformers optimizer's
fused model (Attention, EmbedLayerNormalization, SkipLayerNormalization, BiasGelu or
FastGelu), also quantized after it (QAttention, MatMulNBits). Shared by tools/bench_tools.py
and tests/models/test_tool_models.py.

The tools (onnxruntime.quantization, onnxruntime.transformers) are test and benchmark
dependencies only; they are imported inside the functions that use them.
"""

import logging

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F32 = np.float32


class _G:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}{self.n}"

    def const(self, arr, base="w"):
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def node(self, op, ins, **attrs):
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, ins, [out], name=out, **attrs))
        return out

    def dense(self, x, k, n, relu=True):
        w = self.const((self.rng.standard_normal((k, n)) / np.sqrt(k)).astype(F32))
        b = self.const((self.rng.standard_normal(n) * 0.1).astype(F32), "b")
        y = self.node("Add", [self.node("MatMul", [x, w]), b])
        return self.node("Relu", [y]) if relu else y

    def conv(self, x, cin, cout, k=3, stride=1, relu=True):
        w = self.const((self.rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k))
                       .astype(F32))
        b = self.const((self.rng.standard_normal(cout) * 0.1).astype(F32), "b")
        y = self.node("Conv", [x, w, b], kernel_shape=[k, k], pads=[k // 2] * 4,
                      strides=[stride, stride])
        return self.node("Relu", [y]) if relu else y

    def model(self, inputs, out, opset=17):
        self.nodes[-1].output[0] = "y"  # the last node's output is read by no other node
        g = helper.make_graph(self.nodes, "g", inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        m.ir_version = 8
        return m


def mlp(seed=0, k=256, hidden=512, n=64):
    """MatMul + Add + Relu, three layers; input x [batch, k]."""
    g = _G(seed)
    h = g.dense("x", k, hidden)
    h = g.dense(h, hidden, hidden)
    g.dense(h, hidden, n, relu=False)
    return g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])], "y")


def cnn(seed=1):
    """Conv-Relu stem, a stride-2 Conv, a residual block, GlobalAveragePool, Gemm; input
    image [1, 3, 32, 32]."""
    g = _G(seed)
    h = g.conv("image", 3, 16)
    h = g.conv(h, 16, 32, stride=2)
    r = g.conv(h, 32, 32)
    r = g.conv(r, 32, 32, relu=False)
    h = g.node("Relu", [g.node("Add", [h, r])])
    h = g.node("Flatten", [g.node("GlobalAveragePool", [h])])
    w = g.const((g.rng.standard_normal((10, 32)) / np.sqrt(32)).astype(F32))
    b = g.const(np.zeros(10, F32), "b")
    g.node("Gemm", [h, w, b], transB=1)
    return g.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 32, 32])],
                   "y")


def lstm(seed=2, seq=16, inp=32, hidden=64, classes=8):
    """LSTM over [seq, 1, inp], its last hidden state through a dense layer."""
    g = _G(seed)
    W = g.const((g.rng.standard_normal((1, 4 * hidden, inp)) / np.sqrt(inp)).astype(F32))
    R = g.const((g.rng.standard_normal((1, 4 * hidden, hidden)) / np.sqrt(hidden)).astype(F32))
    B = g.const((g.rng.standard_normal((1, 8 * hidden)) * 0.1).astype(F32), "b")
    out = g.name("lstm")
    yh = g.name("yh")
    g.nodes.append(helper.make_node("LSTM", ["x", W, R, B], [out, yh], hidden_size=hidden))
    h = g.node("Reshape", [yh, g.const(np.array([1, hidden], np.int64), "shape")])
    g.dense(h, hidden, classes, relu=False)
    return g.model([helper.make_tensor_value_info("x", TensorProto.FLOAT, [seq, 1, inp])], "y")


def bert(layers=2, hidden=64, heads=4, inter=128, vocab=100, max_pos=32, seed=0, opset=14):
    """A seeded float BERT encoder in the shape exporters write (decomposed layer norms, erf
    GELU, the additive mask from a 0/1 attention_mask), opset < 17."""
    rng = np.random.default_rng(seed)
    H = hidden // heads
    nodes, inits = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(name, *shape):
        return const(name, (rng.standard_normal(shape) * 0.1).astype(F32))

    def node(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=out + "_node", **kw))
        return out

    def layer_norm(x, p):
        g = const(p + "_g", (1 + 0.1 * rng.standard_normal(hidden)).astype(F32))
        b = weight(p + "_b", hidden)
        m = node("ReduceMean", [x], p + "_mean", axes=[-1])
        d = node("Sub", [x, m], p + "_sub")
        pw = node("Pow", [d, const(p + "_two", np.array(2.0, F32))], p + "_pow")
        v = node("ReduceMean", [pw], p + "_var", axes=[-1])
        ve = node("Add", [v, const(p + "_eps", np.array(1e-12, F32))], p + "_ve")
        dv = node("Div", [d, node("Sqrt", [ve], p + "_sqrt")], p + "_div")
        return node("Add", [node("Mul", [dv, g], p + "_mul"), b], p + "_out")

    const("axes0", np.array([0], np.int64))
    const("axes1", np.array([1], np.int64))
    const("axes2", np.array([2], np.int64))
    const("shape_heads", np.array([0, 0, heads, H], np.int64))
    const("shape_hidden", np.array([0, 0, hidden], np.int64))
    const("one", np.array(1.0, F32))
    const("neg", np.array(-10000.0, F32))
    const("sqrt_h", np.array(np.sqrt(H), F32))
    const("sqrt2", np.array(np.sqrt(2.0), F32))
    const("half", np.array(0.5, F32))
    # Embeddings; position ids 0 .. seq-1 from the input's shape.
    seq = node("Gather", [node("Shape", ["input_ids"], "ids_shape"),
                          const("idx1", np.array(1, np.int64))], "seq_len", axis=0)
    pos = node("Unsqueeze", [node("Range", [const("zero_i", np.array(0, np.int64)), seq,
                                            const("one_i", np.array(1, np.int64))], "pos_range"),
                             "axes0"], "pos_ids")
    e = node("Add", [node("Gather", [weight("word_emb", vocab, hidden), "input_ids"], "emb_w"),
                     node("Gather", [weight("pos_emb", max_pos, hidden), pos], "emb_p")], "emb_1")
    e = node("Add", [e, node("Gather", [weight("seg_emb", 2, hidden), "token_type_ids"],
                             "emb_s")], "emb_2")
    x = layer_norm(e, "emb_ln")
    m = node("Unsqueeze", [node("Unsqueeze", ["attention_mask", "axes1"], "mask_u0"), "axes2"],
             "mask_u1")
    m = node("Mul", [node("Sub", ["one", node("Cast", [m], "mask_f", to=TensorProto.FLOAT)],
                          "mask_sub"), "neg"], "mask_add")
    for layer in range(layers):
        p = f"l{layer}_"

        def dense(inp, name, n_in, n_out):
            mm = node("MatMul", [inp, weight(p + name + "_w", n_in, n_out)], p + name + "_mm")
            return node("Add", [mm, weight(p + name + "_b", n_out)], p + name + "_add")

        def heads_of(name, perm):
            rs = node("Reshape", [dense(x, name, hidden, hidden), "shape_heads"], p + name + "_rs")
            return node("Transpose", [rs], p + name + "_tr", perm=perm)

        q, k, v = (heads_of("q", [0, 2, 1, 3]), heads_of("k", [0, 2, 3, 1]),
                   heads_of("v", [0, 2, 1, 3]))
        s = node("Div", [node("MatMul", [q, k], p + "qk"), "sqrt_h"], p + "qk_div")
        s = node("Softmax", [node("Add", [s, m], p + "qk_add")], p + "probs", axis=3)
        c = node("Transpose", [node("MatMul", [s, v], p + "ctx")], p + "ctx_tr", perm=[0, 2, 1, 3])
        c = node("Reshape", [c, "shape_hidden"], p + "ctx_rs")
        x = layer_norm(node("Add", [dense(c, "o", hidden, hidden), x], p + "res1"), p + "ln1")
        f = dense(x, "f1", hidden, inter)
        g = node("Erf", [node("Div", [f, "sqrt2"], p + "gelu_div")], p + "gelu_erf")
        g = node("Mul", [node("Mul", [f, node("Add", [g, "one"], p + "gelu_add")], p + "gelu_mul"),
                         "half"], p + "gelu")
        x = layer_norm(node("Add", [dense(g, "f2", inter, hidden), x], p + "res2"), p + "ln2")
    node("Identity", [x], "last_hidden_state")
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    out = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                         ["batch", "seq", hidden])]
    model = helper.make_model(helper.make_graph(nodes, "bert", inputs, out, initializer=inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def gpt2(layers=2, hidden=64, heads=4, inter=256, vocab=100, max_pos=32, seed=0, opset=13):
    """A seeded float GPT-2 decoder in the shape its PyTorch export writes (what
    onnxruntime.transformers' "gpt2" fusions look for): input_ids only, position ids from the
    input's shape, decomposed layer norms, Conv1D layers as Reshape -> Gemm -> Reshape,
    causal self-attention (the fused q/k/v projection Split into heads, the mask a Slice of a
    constant lower-triangular buffer, Where to -10000), tanh GELU, a final layer norm and
    logits through the transposed token embedding (tied weights, written as a constant)."""
    rng = np.random.default_rng(seed)
    H = hidden // heads
    nodes, inits = [], []

    def const(name, arr):
        inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def weight(name, *shape, scale=0.1):
        return const(name, (rng.standard_normal(shape) * scale).astype(F32))

    def node(op, ins, out, **kw):
        nodes.append(helper.make_node(op, ins, [out], name=out + "_node", **kw))
        return out

    def layer_norm(x, p):
        g = const(p + "_g", (1 + 0.1 * rng.standard_normal(hidden)).astype(F32))
        b = weight(p + "_b", hidden)
        m = node("ReduceMean", [x], p + "_mean", axes=[-1])
        d = node("Sub", [x, m], p + "_sub")
        pw = node("Pow", [d, "two"], p + "_pow")
        v = node("ReduceMean", [pw], p + "_var", axes=[-1])
        dv = node("Div", [d, node("Sqrt", [node("Add", [v, "eps"], p + "_ve")], p + "_sqrt")],
                  p + "_div")
        return node("Add", [node("Mul", [dv, g], p + "_mul"), b], p + "_out")

    def conv1d(x, p, n_in, n_out):
        """HF's Conv1D: x.view(-1, n_in) @ W + b, back to [batch, seq, n_out]."""
        x2 = node("Reshape", [x, const(p + "_2d", np.array([-1, n_in], np.int64))], p + "_in2d")
        y = node("Gemm", [x2, weight(p + "_w", n_in, n_out, scale=0.1 / np.sqrt(n_in / 64)),
                          weight(p + "_b", n_out)], p + "_gemm")
        shape = node("Concat", ["bs_dims", const(p + "_n", np.array([n_out], np.int64))],
                     p + "_shape", axis=0)
        return node("Reshape", [y, shape], p + "_out3d")

    const("two", np.array(2.0, F32))
    const("eps", np.array(1e-5, F32))
    const("half", np.array(0.5, F32))
    const("one", np.array(1.0, F32))
    const("c0044", np.array(0.044715, F32))
    const("c0797", np.array(np.sqrt(2 / np.pi), F32))
    const("three", np.array(3.0, F32))
    const("sqrt_h", np.array(np.sqrt(H), F32))
    const("masked_bias", np.array(-10000.0, F32))
    const("causal", np.tril(np.ones((max_pos, max_pos), np.uint8))[None, None])
    const("shape_heads_tail", np.array([heads, H], np.int64))
    const("shape_hidden_tail", np.array([hidden], np.int64))
    for n, v in (("i0", [0]), ("i1", [1]), ("i2", [2]), ("i3", [3]), ("im1", [-1]),
                 ("im2", [-2]), ("imax", [2 ** 62])):
        const(n, np.array(v, np.int64))
    const("zero_s", np.array(0, np.int64))
    const("one_s", np.array(1, np.int64))
    # [batch, seq] of the input, and position ids 0 .. seq - 1.
    ids_shape = node("Shape", ["input_ids"], "ids_shape")
    node("Slice", [ids_shape, "i0", "i2", "i0"], "bs_dims")
    seq = node("Squeeze", [node("Slice", [ids_shape, "i1", "i2", "i0"], "seq_1d"), "i0"], "seq")
    pos = node("Unsqueeze", [node("Range", ["zero_s", seq, "one_s"], "pos_range"), "i0"],
               "pos_ids")
    x = node("Add", [node("Gather", [weight("wte", vocab, hidden, scale=0.2), "input_ids"],
                          "emb_tok"),
                     node("Gather", [weight("wpe", max_pos, hidden, scale=0.05), pos], "emb_pos")],
             "emb")
    heads_shape = node("Concat", ["bs_dims", "shape_heads_tail"], "heads_shape", axis=0)
    hidden_shape = node("Concat", ["bs_dims", "shape_hidden_tail"], "hidden_shape", axis=0)
    for layer in range(layers):
        p = f"h{layer}_"
        qkv = conv1d(layer_norm(x, p + "ln1"), p + "attn", hidden, 3 * hidden)
        split = [p + "q", p + "k", p + "v"]
        nodes.append(helper.make_node("Split", [qkv], split, name=p + "split", axis=2))

        def heads_of(v, perm):
            return node("Transpose", [node("Reshape", [v, heads_shape], v + "_rs")], v + "_tr",
                        perm=perm)

        q, k, v = (heads_of(split[0], [0, 2, 1, 3]), heads_of(split[1], [0, 2, 3, 1]),
                   heads_of(split[2], [0, 2, 1, 3]))
        w = node("Div", [node("MatMul", [q, k], p + "qk"), "sqrt_h"], p + "qk_div")
        # mask = causal[:, :, ns - nd:ns, :ns], nd / ns: the scores' last two dims.
        w_shape = node("Shape", [w], p + "w_shape")
        ns = node("Squeeze", [node("Slice", [w_shape, "im1", "imax", "i0"], p + "ns_1d"), "i0"],
                  p + "ns")
        nd = node("Squeeze", [node("Slice", [w_shape, "im2", "im1", "i0"], p + "nd_1d"), "i0"],
                  p + "nd")
        start = node("Unsqueeze", [node("Sub", [ns, nd], p + "ns_nd"), "i0"], p + "start")
        ns1 = node("Unsqueeze", [ns, "i0"], p + "ns_u")
        rows = node("Slice", ["causal", start, ns1, "i2"], p + "mask_rows")
        mask = node("Slice", [rows, "i0", ns1, "i3"], p + "mask")
        mask = node("Cast", [mask], p + "mask_bool", to=TensorProto.BOOL)
        w = node("Where", [mask, w, "masked_bias"], p + "masked")
        a = node("MatMul", [node("Softmax", [w], p + "probs", axis=-1), v], p + "ctx")
        a = node("Reshape", [node("Transpose", [a], p + "ctx_tr", perm=[0, 2, 1, 3]),
                             hidden_shape], p + "ctx_rs")
        x = node("Add", [x, conv1d(a, p + "proj", hidden, hidden)], p + "res1")
        f = conv1d(layer_norm(x, p + "ln2"), p + "fc", hidden, inter)
        # gelu_new: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
        cube = node("Mul", [node("Pow", [f, "three"], p + "g_pow"), "c0044"], p + "g_cube")
        t = node("Tanh", [node("Mul", [node("Add", [f, cube], p + "g_add1"), "c0797"],
                               p + "g_mul2")], p + "g_tanh")
        g = node("Mul", [node("Mul", [f, "half"], p + "g_half"),
                         node("Add", [t, "one"], p + "g_add2")], p + "gelu")
        x = node("Add", [x, conv1d(g, p + "mlp_proj", inter, hidden)], p + "res2")
    x = layer_norm(x, "ln_f")
    wte = next(t for t in inits if t.name == "wte")
    const("lm_head", numpy_helper.to_array(wte).T.copy())
    node("MatMul", [x, "lm_head"], "logits")
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])]
    out = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", "seq", vocab])]
    model = helper.make_model(helper.make_graph(nodes, "gpt2", inputs, out, initializer=inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def bert_base(seed=3):
    """The benchmark's BERT encoder: 2 layers, hidden 128, 4 heads, intermediate 512."""
    return bert(hidden=128, inter=512, vocab=1000, max_pos=128, seed=seed)


def gpt2_base(seed=4):
    """The benchmark's GPT-2 decoder: 2 blocks, hidden 128, 4 heads, MLP 512, 1000 tokens."""
    return gpt2(hidden=128, inter=512, vocab=1000, max_pos=128, seed=seed)


FLOAT_MODELS = {"mlp": mlp, "cnn": cnn, "lstm": lstm, "bert": bert_base, "gpt2": gpt2_base}


def feeds(model, seed=0, batch=4, seq=32):
    """Seeded feeds from the model's inputs (symbolic dims: `seq` is seq, any other batch).
    int64 inputs are a BERT's: token ids below 100, 0/1 segment ids, and an attention mask
    with padding at the end of every other sequence."""
    rng = np.random.default_rng(seed)
    out = {}
    for vi in model.graph.input:
        dims = [d.dim_value if d.HasField("dim_value") else (seq if d.dim_param == "seq" else batch)
                for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == TensorProto.INT64:
            if vi.name == "attention_mask":
                v = np.ones(dims, np.int64)
                v[1::2, dims[1] * 3 // 4:] = 0
            elif vi.name == "token_type_ids":
                v = rng.integers(0, 2, dims).astype(np.int64)
            else:
                v = rng.integers(0, 100, dims).astype(np.int64)
            out[vi.name] = v
        else:
            out[vi.name] = rng.standard_normal(dims).astype(F32)
    return out


class _Reader:
    def __init__(self, model, n=8):
        self.items = [feeds(model, seed=100 + i) for i in range(n)]

    def get_next(self):
        return self.items.pop() if self.items else None

    def rewind(self):
        pass


def _quiet():
    logging.getLogger("onnxruntime").setLevel(logging.WARNING)
    for name in ("onnxruntime.quantization", "root"):
        logging.getLogger(name).setLevel(logging.WARNING)


_SATURATES = None


def ort_u8s8_saturates():
    """Whether onnxruntime's u8 x s8 integer products saturate on this CPU (without VNNI it
    adds pairs of products in saturating int16): 2 x 255 x 127 comes back as 32767."""
    global _SATURATES
    if _SATURATES is None:
        import onnxruntime

        a, b = np.full((1, 2), 255, np.uint8), np.full((2, 1), 127, np.int8)
        g = helper.make_graph(
            [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "g",
            [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 2])],
            [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
            [numpy_helper.from_array(b, "b")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        s = onnxruntime.InferenceSession(m.SerializeToString(),
                                         providers=["CPUExecutionProvider"])
        _SATURATES = int(s.run(None, {"a": a})[0].ravel()[0]) != 2 * 255 * 127
    return _SATURATES


def variant(kind, model, tmp_dir, fused=False):
    """The model `kind` of onnxruntime's tools writes from float `model` (a ModelProto):
    "dynamic" (int8 weights), "dynamic_u8" (uint8 weights), "qdq", "qoperator", "nbits",
    "fp16" or, for a BERT encoder or a GPT-2 decoder, "opt" (onnxruntime.transformers.optimizer,
    model_type "bert" or "gpt2") and "opt_dynamic" / "opt_nbits" (the optimizer's model through
    quantize_dynamic / MatMulNBitsQuantizer). tmp_dir: a pathlib.Path for the tools' files;
    fused: `model` holds com.microsoft nodes (the optimizer's)."""
    import onnx

    _quiet()
    if kind.startswith("opt_"):
        # The transformers optimizer's model, then the other tool on it (onnxruntime's GPT-2
        # conversion tool quantizes its optimized model this way).
        return variant(kind[4:], variant("opt", model, tmp_dir), tmp_dir, fused=True)
    src = tmp_dir / f"{kind}_in.onnx"
    dst = tmp_dir / f"{kind}.onnx"
    onnx.save(model, str(src))
    if kind in ("dynamic", "dynamic_u8"):
        from onnxruntime.quantization import QuantType, quantize_dynamic

        # onnxruntime's ConvInteger takes uint8 weights only: convolutional models are
        # quantized with QUInt8 weights for it.
        wt = QuantType.QInt8 if kind == "dynamic" else QuantType.QUInt8
        # The types of com.microsoft outputs are unknown to onnx's shape inference:
        # onnxruntime's GPT-2 tool gives the default type for them.
        extra = {"DefaultTensorType": TensorProto.FLOAT} if fused else {}
        # 7-bit int8 weights (reduce_range) on CPUs where onnxruntime's u8 x s8 products
        # saturate (no VNNI), as onnxruntime advises there: both runtimes are exact then.
        quantize_dynamic(str(src), str(dst), weight_type=wt, extra_options=extra,
                         reduce_range=wt == QuantType.QInt8 and ort_u8s8_saturates())
    elif kind in ("qdq", "qoperator"):
        from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

        fmt = QuantFormat.QDQ if kind == "qdq" else QuantFormat.QOperator
        quantize_static(str(src), str(dst), _Reader(model), quant_format=fmt,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    elif kind == "nbits":
        from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

        q = MatMulNBitsQuantizer(model, block_size=32, is_symmetric=True)
        q.process()
        onnx.save(q.model.model, str(dst))
    elif kind == "fp16":
        from onnxruntime.transformers.float16 import convert_float_to_float16

        onnx.save(convert_float_to_float16(model, keep_io_types=True), str(dst))
    elif kind == "opt":
        model_type, heads, hidden = _transformer_config(model)
        opt = _transformers_optimizer().optimize_model(
            str(src), model_type=model_type, num_heads=heads, hidden_size=hidden, opt_level=0)
        opt.save_model_to_file(str(dst))
    else:
        raise ValueError(f"unknown variant {kind!r}")
    return onnx.load(str(dst))


def _transformer_config(model):
    """(model_type, num_heads, hidden_size) of a model of bert() or gpt2()."""
    inits = {t.name: t for t in model.graph.initializer}
    if "shape_heads" in inits:
        return ("bert", int(numpy_helper.to_array(inits["shape_heads"])[2]),
                model.graph.output[0].type.tensor_type.shape.dim[2].dim_value)
    if "shape_heads_tail" in inits:
        heads, size = (int(v) for v in numpy_helper.to_array(inits["shape_heads_tail"]))
        return "gpt2", heads, heads * size
    raise ValueError("not a model of bert() or gpt2(): no 'shape_heads' initializer")


def _transformers_optimizer():
    """onnxruntime.transformers.optimizer. It imports torch only to read torch.version.hip;
    without torch a stand-in module serves for that import (as onnxruntime's CPU-only tests
    do), and is removed again."""
    import sys
    import types

    stub = None
    try:
        import torch  # noqa: F401
    except ImportError:
        stub = types.ModuleType("torch")
        stub.version = types.SimpleNamespace(hip=None, cuda=None)
        sys.modules["torch"] = stub
    try:
        from onnxruntime.transformers import optimizer
        return optimizer
    finally:
        if stub is not None and sys.modules.get("torch") is stub:
            del sys.modules["torch"]


# (float model, variant, rtol, atol as a fraction of max|onnxruntime output|). Quantized
# variants differ from onnxruntime by flipped roundings: an activation value at a
# quantization step's midpoint, computed with a last-bit difference, lands one step apart
# (1/255 of its range) and that step propagates; a few steps of the output's range bound it.
# float16 keeps 11 significant bits per intermediate value.
CASES = [
    ("mlp", "dynamic", 2e-2, 2e-2), ("cnn", "dynamic_u8", 2e-2, 2e-2),
    ("lstm", "dynamic", 2e-2, 2e-2),
    ("mlp", "qdq", 2e-2, 3e-2), ("cnn", "qdq", 2e-2, 3e-2),
    ("mlp", "qoperator", 2e-2, 3e-2), ("cnn", "qoperator", 2e-2, 3e-2),
    ("mlp", "nbits", 1e-3, 1e-3),
    ("mlp", "fp16", 1e-2, 1e-2), ("cnn", "fp16", 1e-2, 1e-2),
    ("bert", "dynamic", 2e-2, 2e-2), ("bert", "nbits", 1e-3, 1e-3), ("bert", "opt", 1e-4, 1e-4),
    ("gpt2", "opt", 1e-4, 1e-4), ("gpt2", "dynamic", 2e-2, 2e-2), ("gpt2", "nbits", 1e-3, 1e-3),
    ("gpt2", "opt_dynamic", 2e-2, 2e-2), ("gpt2", "opt_nbits", 1e-3, 1e-3),
]
# Not here: the float16 BERT and GPT-2, which onnxruntime 1.23.2 itself refuses at load (its
# layer-norm fusion looks for a Cast input that the float16 converter's model does not have).
