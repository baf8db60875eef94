"""Runs the demo model end to end with ortlite and with onnxruntime: prints the outputs,
the largest difference between the two runtimes and the per-call latency of each.

usage: python tools/demo.py build/demo/cnn_classifier.onnx
"""

import statistics
import sys
import time

import numpy as np

import ortlite
from settle import settle


def latencies_us(sessions, feeds, reps=2000):
    """Median per-call time of each session, measured interleaved: 7 blocks of calls each,
    one session's block after the other's. Before each block, an untimed pause until the
    worker threads the previous block left spinning are idle (tools/settle.py: onnxruntime's
    spin for about 35 ms after a run, ortlite's for 1 ms), so that they do not take a core
    from the block being timed."""
    for sess in sessions:
        for _ in range(10):
            sess.run(None, feeds)
    n = reps // 7 + 1
    samples = [[] for _ in sessions]
    for _ in range(7):
        for i, sess in enumerate(sessions):
            settle()
            t0 = time.perf_counter()
            for _ in range(n):
                sess.run(None, feeds)
            samples[i].append((time.perf_counter() - t0) / n * 1e6)
    return [statistics.median(s) for s in samples]


def main():
    path = sys.argv[1]
    sess = ortlite.InferenceSession(path)
    print(f"ortlite {ortlite.__version__}: loaded {path}")
    for i in sess.get_inputs():
        print(f"  input  {i.name}: {i.type} {i.shape}")
    for o in sess.get_outputs():
        print(f"  output {o.name}: {o.type} {o.shape}")

    rng = np.random.default_rng(42)
    image = rng.standard_normal((1, 3, 32, 32)).astype(np.float32)
    feeds = {"image": image}
    (probs,) = sess.run(None, feeds)
    top = np.argsort(probs[0])[::-1][:5]
    print("top-5 classes:", ", ".join(f"{c}: {probs[0][c]:.4f}" for c in top))
    print("probabilities sum to", f"{probs.sum():.6f}")

    try:
        import onnxruntime
    except ImportError:
        print("onnxruntime is not installed: no comparison")
        return 0
    so = onnxruntime.SessionOptions()
    ref = onnxruntime.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    (expected,) = ref.run(None, feeds)
    diff = float(np.max(np.abs(probs - expected)))
    print(f"largest |ortlite - onnxruntime|: {diff:.3e}")

    t_lite, t_ort = latencies_us([sess, ref], feeds)
    print(f"latency per run (median of 7, interleaved): ortlite {t_lite:.1f} us, "
          f"onnxruntime {t_ort:.1f} us, "
          f"ratio onnxruntime/ortlite {t_ort / t_lite:.2f}")
    if diff > 1e-4:
        print("FAIL: outputs differ from onnxruntime")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
