"""Sessions that travel (docs/distributed.md): pickle size and unpickle time of a session
with ~100 MB of weights, and the throughput of one model run by one process vs by 2
worker processes (multiprocessing fork / spawn, ProcessPoolExecutor, dask, ray).

    python tools/bench_distributed.py [--weights-mb 100] [--blocks 64] [--skip-dask] [--ray]

Prints its command, then one line per measurement; the throughput ratios are against
the single-process run measured in the same invocation.
"""

import argparse
import warnings
import concurrent.futures
import gc
import multiprocessing
import os
import pickle
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import ortlite  # noqa: E402


def mlp_bytes(widths, seed=0):
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    nodes, inits, h = [], [], "x"
    for i in range(len(widths) - 1):
        w = (rng.standard_normal((widths[i], widths[i + 1]), dtype=np.float32)
             / np.float32(np.sqrt(widths[i])))
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        last = i == len(widths) - 2
        nodes.append(helper.make_node("MatMul", [h, f"w{i}"], ["y" if last else f"m{i}"]))
        if not last:
            nodes.append(helper.make_node("Relu", [f"m{i}"], [f"h{i}"]))
            h = f"h{i}"
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", widths[0]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", widths[-1]])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m.SerializeToString()


def session(model, threads=1, **entries):
    so = ortlite.SessionOptions()
    so.intra_op_num_threads = threads
    for k, v in entries.items():
        so.add_session_config_entry(k, v)
    return ortlite.InferenceSession(model, so)


def run_block(sess, x):
    return sess.run(None, {"x": x})[0]


_SESS = None


def run_global(x):
    return run_block(_SESS, x)


def set_global(sess):
    global _SESS
    _SESS = sess


def timed(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def bench_pickle(weights_mb):
    # Square layers of width 1024 hold 4 MiB each.
    n_layers = max(1, round(weights_mb / 4))
    model = mlp_bytes([1024] * (n_layers + 1))
    print(f"model: {n_layers} MatMul of 1024x1024 float32, {len(model) / 1e6:.1f} MB")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "big.onnx")
        with open(path, "wb") as f:
            f.write(model)
        t = time.perf_counter()
        base = session(path)
        print(f"  InferenceSession(path): {time.perf_counter() - t:.3f} s")
        x = np.ones((1, 1024), np.float32)
        want = run_block(base, x)
        for label, sess in [("bytes", base),
                            ("path", session(path, **{ortlite._pickle.PICKLE_MODEL_ENTRY: "path"}))]:
            t = time.perf_counter()
            blob = pickle.dumps(sess, protocol=5)
            dump_s = time.perf_counter() - t
            t = time.perf_counter()
            blob = pickle.dumps(sess, protocol=5)
            dump2_s = time.perf_counter() - t
            buffers = []
            oob = pickle.dumps(sess, protocol=5, buffer_callback=buffers.append)
            if label == "bytes":
                del sess
            ortlite._pickle.cache_clear()
            gc.collect()
            t = time.perf_counter()
            got = pickle.loads(blob)
            cold = time.perf_counter() - t
            assert np.array_equal(run_block(got, x), want)
            t = time.perf_counter()
            again = pickle.loads(blob)
            warm = time.perf_counter() - t
            assert again is got
            print(f"  {label:5s} mode: pickle {len(blob) / 1e6:.2f} MB in-band "
                  f"({len(oob)} B + {sum(b.raw().nbytes for b in buffers) / 1e6:.1f} MB "
                  f"out of band); dumps {dump_s:.3f} s first (hashes), {dump2_s:.3f} s after; "
                  f"loads {cold:.3f} s (load), {warm * 1e3:.2f} ms (cache hit)")
            del got, again, blob, oob, buffers
            ortlite._pickle.cache_clear()
            gc.collect()


def bench_throughput(n_blocks, rows, skip_dask, with_ray):
    global _SESS
    model = mlp_bytes([256, 1024, 1024, 256])
    sess = session(model, threads=1)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((rows, 256), dtype=np.float32) for _ in range(n_blocks)]
    want = [run_block(sess, x) for x in xs]
    n = n_blocks * rows
    print(f"throughput: {n_blocks} blocks of {rows} rows, MLP 256-1024-1024-256, "
          f"1 intra-op thread per process, {os.cpu_count()} cores")

    def check(outs):
        assert all(np.allclose(o, w, rtol=1e-5, atol=1e-5) for o, w in zip(outs, want))

    t1 = timed(lambda: check([run_block(sess, x) for x in xs]))
    print(f"  single process, 1 thread      {n / t1:10.0f} rows/s  1.00x")
    so2 = session(model, threads=2)
    t = timed(lambda: check([run_block(so2, x) for x in xs]))
    print(f"  single process, 2 threads     {n / t:10.0f} rows/s  {t1 / t:.2f}x")

    def report(label, fn):
        t = timed(fn, repeat=2)
        print(f"  {label:30s}{n / t:10.0f} rows/s  {t1 / t:.2f}x  (pool already started)")

    _SESS = sess
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pool.map(run_global, xs[:2])
        report("Pool(2) fork, global session", lambda: check(pool.map(run_global, xs)))
        report("Pool(2) fork, session pickled", lambda: check(
            pool.starmap(run_block, [(sess, x) for x in xs])))
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.starmap(run_block, [(sess, x) for x in xs[:2]])
        report("Pool(2) spawn, session pickled", lambda: check(
            pool.starmap(run_block, [(sess, x) for x in xs])))
    with multiprocessing.get_context("spawn").Pool(2, set_global, (sess,)) as pool:
        pool.map(run_global, xs[:2])
        report("Pool(2) spawn, initializer", lambda: check(pool.map(run_global, xs)))
    with concurrent.futures.ProcessPoolExecutor(
            2, mp_context=multiprocessing.get_context("spawn")) as ex:
        list(ex.map(run_block, [sess] * 2, xs[:2]))
        report("ProcessPoolExecutor(2) spawn", lambda: check(
            list(ex.map(run_block, [sess] * len(xs), xs))))
    if not skip_dask:
        import dask.array as da
        import distributed
        with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                      dashboard_address=None, silence_logs=50) as cluster, \
                distributed.Client(cluster) as client:
            arr = da.from_array(np.concatenate(xs), chunks=(rows, 256))
            [remote] = client.scatter([sess], broadcast=True)

            def dask_run():
                out = arr.map_blocks(lambda b, s: run_block(s, b), sess, dtype=np.float32)
                res = out.compute()
                check(np.split(res, n_blocks))

            def dask_futures():
                check(client.gather(client.map(run_block, [remote] * len(xs), xs, pure=False)))
            dask_run()
            report("dask map_blocks, 2 workers", dask_run)
            report("dask futures, scattered sess", dask_futures)
    if with_ray:
        import ray
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        task = ray.remote(num_cpus=1)(run_block)
        ref = ray.put(sess)
        ray.get([task.remote(ref, x) for x in xs[:2]])
        report("ray tasks, 2 CPUs", lambda: check(ray.get([task.remote(ref, x) for x in xs])))
        ray.shutdown()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--weights-mb", type=float, default=100)
    ap.add_argument("--blocks", type=int, default=64)
    ap.add_argument("--rows", type=int, default=256)
    ap.add_argument("--skip-dask", action="store_true")
    ap.add_argument("--ray", action="store_true")
    ap.add_argument("--skip-pickle", action="store_true")
    args = ap.parse_args()
    print("$ python " + " ".join(sys.argv))
    warnings.filterwarnings("ignore", message="Sending large graph")
    if not args.skip_pickle:
        bench_pickle(args.weights_mb)
    bench_throughput(args.blocks, args.rows, args.skip_dask, args.ray)


if __name__ == "__main__":
    main()
