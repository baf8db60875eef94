// make embed: a C++ program that hosts CPython, imports ortlite from the repository,
// runs a model with InferenceSession.run and with run_async (callbacks and a Future),
// and calls Py_FinalizeEx while callbacks are still pending. It must exit 0 and run
// clean under valgrind memcheck (tools/valgrind/run_embed.sh).
//
// Usage: ortlite_embed REPO_ROOT SITE_PACKAGES MODEL.onnx
// The model (tools/embed/make_model.py): Y = Relu(MatMul(...Relu(MatMul(X, W))..., W)),
// X [N, N] float32, W a deterministic initializer that the host recomputes with numpy.
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace {

std::atomic<int> g_ok_callbacks{0};
std::atomic<int> g_err_callbacks{0};
std::atomic<int> g_bad_callbacks{0};

constexpr int kAsyncRuns = 12;
constexpr int kWaited = 3;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "embed: %s\n", what);
  if (PyErr_Occurred()) PyErr_Print();
  std::exit(1);
}

PyObject* check(PyObject* o, const char* what) {
  if (!o) die(what);
  return o;
}

// callback(results, user_data, err): checks the results against the expected array
// passed as user_data; counts successes and cancellations.
PyObject* on_done(PyObject*, PyObject* args) {
  PyObject *results, *expected, *err;
  if (!PyArg_ParseTuple(args, "OOO", &results, &expected, &err)) return nullptr;
  Py_ssize_t errlen = PyUnicode_Check(err) ? PyUnicode_GetLength(err) : -1;
  if (errlen > 0) {
    g_err_callbacks++;
    Py_RETURN_NONE;
  }
  if (errlen != 0 || !PyList_Check(results) || PyList_Size(results) != 1) {
    g_bad_callbacks++;
    Py_RETURN_NONE;
  }
  PyObject* np = PyImport_ImportModule("numpy");
  if (!np) return nullptr;
  PyObject* same =
      PyObject_CallMethod(np, "allclose", "OOdd", PyList_GetItem(results, 0), expected, 1e-4, 1e-5);
  Py_DECREF(np);
  if (!same) return nullptr;
  (PyObject_IsTrue(same) == 1 ? g_ok_callbacks : g_bad_callbacks)++;
  Py_DECREF(same);
  Py_RETURN_NONE;
}

PyMethodDef on_done_def = {"on_done", on_done, METH_VARARGS, "run_async callback"};

// Python helpers: the feed and the expected result, computed with numpy alone.
const char* kHelpers = R"(
import numpy as np
def make_inputs(n, depth):
    w = ((np.arange(n * n, dtype=np.int64).reshape(n, n) % 7) - 3).astype(np.float32) / 8
    x = ((np.arange(n * n, dtype=np.int64).reshape(n, n) % 5) - 2).astype(np.float32) / 4
    y = x
    for _ in range(depth):
        y = np.maximum(y @ w, np.float32(0))
    return x, y
)";

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s REPO_ROOT SITE_PACKAGES MODEL.onnx\n", argv[0]);
    return 2;
  }
  Py_InitializeEx(0);
  {
    PyObject* path = PySys_GetObject("path");  // borrowed
    if (!path) die("sys.path");
    for (const char* p : {argv[2], argv[1]}) {
      PyObject* s = check(PyUnicode_FromString(p), "path");
      if (PyList_Insert(path, 0, s) != 0) die("sys.path.insert");
      Py_DECREF(s);
    }
  }
  PyObject* ort = check(PyImport_ImportModule("ortlite"), "import ortlite");
  PyObject* main_mod = check(PyImport_AddModule("__main__"), "__main__");  // borrowed
  PyObject* globals = PyModule_GetDict(main_mod);                          // borrowed
  Py_XDECREF(check(PyRun_String(kHelpers, Py_file_input, globals, globals), "helpers"));

  // Model metadata: N and depth are in the model's doc string "N,depth".
  PyObject* sess = check(PyObject_CallMethod(ort, "InferenceSession", "s", argv[3]), "session");
  PyObject* meta = check(PyObject_CallMethod(sess, "get_modelmeta", nullptr), "meta");
  PyObject* desc = check(PyObject_GetAttrString(meta, "description"), "description");
  int n = 0, depth = 0;
  if (std::sscanf(PyUnicode_AsUTF8(desc), "%d,%d", &n, &depth) != 2) die("model description");
  Py_DECREF(desc);
  Py_DECREF(meta);

  PyObject* xy = check(PyObject_CallMethod(main_mod, "make_inputs", "ii", n, depth), "inputs");
  PyObject* x = PyTuple_GetItem(xy, 0);         // borrowed
  PyObject* expected = PyTuple_GetItem(xy, 1);  // borrowed
  PyObject* np = check(PyImport_ImportModule("numpy"), "numpy");

  // 1. run
  PyObject* feeds = check(Py_BuildValue("{s:O}", "X", x), "feeds");
  PyObject* out = check(PyObject_CallMethod(sess, "run", "OO", Py_None, feeds), "run");
  PyObject* same = check(
      PyObject_CallMethod(np, "allclose", "OOdd", PyList_GetItem(out, 0), expected, 1e-4, 1e-5),
      "allclose");
  if (PyObject_IsTrue(same) != 1) die("run: wrong result");
  Py_DECREF(same);
  Py_DECREF(out);
  std::printf("embed: run ok (%dx%d, %d MatMul+Relu)\n", n, n, depth);

  // 2. OrtValue and run_with_ort_values.
  {
    PyObject* ov_type = check(PyObject_GetAttrString(ort, "OrtValue"), "OrtValue");
    PyObject* ov = check(PyObject_CallMethod(ov_type, "ortvalue_from_numpy", "O", x), "ortvalue");
    PyObject* ov_feeds = check(Py_BuildValue("{s:O}", "X", ov), "feeds");
    PyObject* outs =
        check(PyObject_CallMethod(sess, "run_with_ort_values", "OO", Py_None, ov_feeds), "rwov");
    PyObject* arr = check(PyObject_CallMethod(PySequence_Fast_GET_ITEM(outs, 0), "numpy", nullptr),
                          "OrtValue.numpy");
    Py_DECREF(outs);  // the array outlives the OrtValue it came from
    same =
        check(PyObject_CallMethod(np, "allclose", "OOdd", arr, expected, 1e-4, 1e-5), "allclose");
    if (PyObject_IsTrue(same) != 1) die("run_with_ort_values: wrong result");
    Py_DECREF(same);
    Py_DECREF(arr);
    Py_DECREF(ov_feeds);
    Py_DECREF(ov);
    Py_DECREF(ov_type);
  }
  std::printf("embed: OrtValue and run_with_ort_values ok\n");

  // 3. Error paths: each raises a typed ortlite error, and nothing leaks.
  {
    PyObject* base = check(PyObject_GetAttrString(ort, "OrtliteError"), "OrtliteError");
    PyObject* bad = check(PyObject_CallMethod(np, "zeros", "(ii)s", 3, 5, "float32"), "zeros");
    PyObject* bad_feeds = check(Py_BuildValue("{s:O}", "X", bad), "feeds");
    PyObject* wrong_name = check(Py_BuildValue("{s:O}", "nope", x), "feeds");
    PyObject* garbage = check(PyBytes_FromString("\x08\x07garbage"), "bytes");
    int raised = 0;
    auto expect_error = [&](PyObject* r, const char* what) {
      if (r) die(what);
      if (!PyErr_ExceptionMatches(base) && !PyErr_ExceptionMatches(PyExc_ValueError)) die(what);
      PyErr_Clear();
      raised++;
    };
    expect_error(PyObject_CallMethod(sess, "run", "OO", Py_None, bad_feeds), "run: bad shape");
    expect_error(PyObject_CallMethod(sess, "run", "OO", Py_None, wrong_name), "run: bad name");
    expect_error(PyObject_CallMethod(sess, "run_async", "OO", Py_None, bad_feeds), "async: shape");
    expect_error(PyObject_CallMethod(ort, "InferenceSession", "O", garbage), "load: garbage");
    expect_error(PyObject_CallMethod(ort, "InferenceSession", "s", "/nonexistent/m.onnx"),
                 "load: no file");
    Py_DECREF(garbage);
    Py_DECREF(wrong_name);
    Py_DECREF(bad_feeds);
    Py_DECREF(bad);
    Py_DECREF(base);
    std::printf("embed: %d error paths raised typed errors\n", raised);
  }

  // 4. run_async with a Future, waited for.
  PyObject* fut = check(PyObject_CallMethod(sess, "run_async", "OO", Py_None, feeds), "future");
  out = check(PyObject_CallMethod(fut, "result", nullptr), "future.result");
  same = check(
      PyObject_CallMethod(np, "allclose", "OOdd", PyList_GetItem(out, 0), expected, 1e-4, 1e-5),
      "allclose");
  if (PyObject_IsTrue(same) != 1) die("run_async future: wrong result");
  Py_DECREF(same);
  Py_DECREF(out);
  Py_DECREF(fut);
  std::printf("embed: run_async with a Future ok\n");

  // 5. run_async with a callback: many queued, the session, feeds and callback dropped at
  // once, and the interpreter finalized while callbacks are still pending.
  // The first kWaited are waited for (the GIL released meanwhile), so some callbacks
  // deliver results; the others are still queued or running at Py_FinalizeEx.
  PyObject* cb = check(PyCFunction_New(&on_done_def, nullptr), "callback");
  for (int i = 0; i < kAsyncRuns; ++i) {
    PyObject* r = check(
        PyObject_CallMethod(sess, "run_async", "OOOO", Py_None, feeds, cb, expected), "run_async");
    Py_DECREF(r);
    if (i + 1 == kWaited) {
      Py_BEGIN_ALLOW_THREADS;
      for (int t = 0; t < 12000 && g_ok_callbacks + g_err_callbacks + g_bad_callbacks < kWaited;
           ++t) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      Py_END_ALLOW_THREADS;
      if (g_ok_callbacks != kWaited) die("the first run_async callbacks did not deliver results");
    }
  }
  // A future left pending too.
  Py_XDECREF(check(PyObject_CallMethod(sess, "run_async", "OO", Py_None, feeds), "future"));
  Py_DECREF(cb);
  Py_DECREF(feeds);
  Py_DECREF(sess);
  Py_DECREF(xy);
  Py_DECREF(np);
  Py_DECREF(ort);
  int delivered_before = g_ok_callbacks + g_err_callbacks + g_bad_callbacks;
  if (Py_FinalizeEx() != 0) die("Py_FinalizeEx");
  int ok = g_ok_callbacks, cancelled = g_err_callbacks, bad = g_bad_callbacks;
  std::printf(
      "embed: %d run_async callbacks: %d delivered before Py_FinalizeEx, %d ok, %d cancelled, "
      "%d wrong\n",
      kAsyncRuns, delivered_before, ok, cancelled, bad);
  if (bad != 0 || ok + cancelled != kAsyncRuns) {
    std::fprintf(stderr, "embed: FAILED: every callback must be called once, with right results\n");
    return 1;
  }
  if (delivered_before == kAsyncRuns) {
    std::printf("embed: note: no callback was pending at Py_FinalizeEx this time\n");
  }
  std::printf("embed: OK\n");
  return 0;
}
