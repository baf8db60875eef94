#include "python/async_run.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <new>
#include <pthread.h>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ortlite/session.h"
#include "ortlite/status.h"
#include "python/errors.h"
#include "python/gil.h"
#include "python/module_state.h"
#include "python/run_helpers.h"
#include "python/session.h"
#include "python/util.h"

namespace ortlite::py {

namespace {

// The completion record. Every PyObject* here is a strong reference, dropped (with the
// GIL held) only after the callback has run or the future was resolved.
struct AsyncRun {
  ModuleState* st = nullptr;
  std::shared_ptr<const Session> sess;
  RunInputs in;  // core feeds + references to the feed objects and the RunConfig
  Ref session_obj;
  Ref run_options;
  Ref callback;  // None-free: null when a future is used
  Ref user_data;
  Ref future;  // a concurrent.futures.Future when no callback was given
  // Set (GIL held) by the future's done-callback when the future is cancelled; a worker
  // that finds it set skips the run.
  std::shared_ptr<std::atomic<bool>> cancelled;

  // Filled by the worker without the GIL; `error` is translated (errors.h, as for run())
  // when the run is delivered.
  std::vector<Value> outputs;
  std::exception_ptr error;
};

// Process-wide worker threads for async runs. Core work happens without the GIL; the
// GIL is taken only to deliver results and drop references.
class AsyncExecutor {
 public:
  // Queues `run`; false when the executor is shutting down (the caller keeps `run`).
  bool submit(std::unique_ptr<AsyncRun>& run) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!accepting_) return false;
    if (workers_.empty()) {
      const unsigned hw = std::thread::hardware_concurrency();
      const unsigned n = hw < 2 ? 2 : (hw > 4 ? 4 : hw);
      for (unsigned i = 0; i < n; ++i) workers_.emplace_back([this] { loop(); });
    }
    queue_.push_back(std::move(run));
    ++in_flight_;
    cv_.notify_one();
    return true;
  }

  // With the GIL held. Returns the runs that never started, for cancellation.
  std::deque<std::unique_ptr<AsyncRun>> stop_accepting() {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = false;
    std::deque<std::unique_ptr<AsyncRun>> pending;
    pending.swap(queue_);
    return pending;
  }

  // Waits (GIL released by the caller) until every started run has been delivered, then
  // joins the workers.
  void drain_and_join(size_t cancelled) {
    std::unique_lock<std::mutex> lock(mu_);
    in_flight_ -= cancelled;
    done_cv_.wait(lock, [this] { return in_flight_ == 0; });
    stopping_ = true;
    cv_.notify_all();
    std::vector<std::thread> workers;
    workers.swap(workers_);
    lock.unlock();
    for (auto& t : workers) t.join();
    lock.lock();
    stopping_ = false;
  }

  void reset() {
    std::lock_guard<std::mutex> lock(mu_);
    accepting_ = true;
  }

  size_t in_flight() {
    std::lock_guard<std::mutex> lock(mu_);
    return in_flight_;
  }

  // fork handlers (registered with the executor). The child has none of the workers, and
  // the runs queued or in flight are the parent's: the child never delivers, cancels or
  // waits for them (their records, with their Python references, are let go of unread;
  // no Python is touched inside fork). Workers start again on the child's first submit.
  void before_fork() { mu_.lock(); }
  void after_fork_in_parent() { mu_.unlock(); }
  void after_fork_in_child() {
    new std::vector<std::thread>(std::move(workers_));
    workers_.clear();
    new std::deque<std::unique_ptr<AsyncRun>>(std::move(queue_));
    queue_.clear();
    in_flight_ = 0;
    stopping_ = false;
    new (&cv_) std::condition_variable();
    new (&done_cv_) std::condition_variable();
    new (&mu_) std::mutex();
  }

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_, done_cv_;
  std::deque<std::unique_ptr<AsyncRun>> queue_;
  std::vector<std::thread> workers_;
  size_t in_flight_ = 0;
  bool accepting_ = true;
  bool stopping_ = false;

  friend void finish(AsyncExecutor& ex);
};

// Leaked on purpose: worker threads may still touch it while static destructors run at
// process exit.
AsyncExecutor& executor();

AsyncExecutor* make_executor() {
  auto* ex = new AsyncExecutor();
  pthread_atfork([] { executor().before_fork(); }, [] { executor().after_fork_in_parent(); },
                 [] { executor().after_fork_in_child(); });
  return ex;
}

AsyncExecutor& executor() {
  static AsyncExecutor* ex = make_executor();
  return *ex;
}

// Runs the core part of a record without the GIL; never throws.
void compute(AsyncRun& run) noexcept {
  try {
    run.outputs = run.sess->run(run.in.feeds, run.in.output_names, run.in.run_config.get(), false,
                                FeedCheck::kChecked);
  } catch (...) {
    run.error = std::current_exception();
  }
}

// The callback's `err` for an exception instance: its message, or its class name when
// the message is empty (MemoryError()), so that a failure never reads as success.
std::string error_text(PyObject* exc) {
  Ref s = Ref::steal(PyObject_Str(exc));
  const char* u = s ? PyUnicode_AsUTF8(s.get()) : nullptr;
  if (u && *u) return u;
  PyErr_Clear();
  return Py_TYPE(exc)->tp_name;
}

// Delivers the result: calls the callback or resolves the future. GIL held. An exception
// from the callback goes to sys.unraisablehook; the worker carries on.
void deliver(AsyncRun& run) {
  Ref results;
  if (!run.error) {
    try {
      // Converted before the record lets go of the feeds (an output may alias one).
      results = outputs_to_numpy(run.st, std::move(run.outputs));
    } catch (...) {
      run.error = std::current_exception();  // (a PythonErrorSet keeps its exception set)
    }
  }
  run.outputs.clear();
  // The exception run() would raise for the same failure (errors.cc: one translation).
  Ref exc;
  if (run.error) {
    exc = Ref::steal(error_object(run.st, run.error));
    if (!exc) {
      PyErr_WriteUnraisable(run.future ? run.future.get() : run.callback.get());
      return;
    }
  }

  if (run.future) {
    if (run.cancelled->load()) return;  // nothing to resolve: cancel() did
    Ref r;
    if (!exc) {
      r = Ref::steal(PyObject_CallMethod(run.future.get(), "set_result", "O", results.get()));
    } else {
      r = Ref::steal(PyObject_CallMethod(run.future.get(), "set_exception", "O", exc.get()));
    }
    // Cancelled between the check and the call: that InvalidStateError is expected, not
    // news. The flag alone does not tell: Future.cancel() marks the future cancelled before
    // it runs the done-callback that sets the flag, and this thread can take the GIL in
    // between, so the future itself is asked.
    if (!r) {
      PyObject *type, *value, *tb;
      PyErr_Fetch(&type, &value, &tb);
      bool cancelled = run.cancelled->load();
      if (!cancelled) {
        Ref c = Ref::steal(PyObject_CallMethod(run.future.get(), "cancelled", nullptr));
        cancelled = c && PyObject_IsTrue(c.get()) == 1;
        PyErr_Clear();
      }
      if (cancelled) {
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
      } else {
        PyErr_Restore(type, value, tb);
        PyErr_WriteUnraisable(run.future.get());
      }
    }
    return;
  }
  if (!results) results = Ref::steal(PyList_New(0));
  Ref err_str = Ref::steal(str_from_utf8(exc ? error_text(exc.get()) : std::string()));
  if (!results || !err_str) {
    PyErr_WriteUnraisable(run.callback.get());
    return;
  }
  Ref r = Ref::steal(PyObject_CallFunctionObjArgs(run.callback.get(), results.get(),
                                                  run.user_data.get(), err_str.get(), nullptr));
  if (!r) PyErr_WriteUnraisable(run.callback.get());
}

void AsyncExecutor::loop() {
  for (;;) {
    std::unique_ptr<AsyncRun> run;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      run = std::move(queue_.front());
      queue_.pop_front();
    }
    if (!run->cancelled || !run->cancelled->load()) compute(*run);
    if (interpreter_finalizing()) {
      // Never call into a finalizing interpreter: the record (and its references) is
      // abandoned. The atexit drain makes this unreachable in normal shutdown.
      run.release();
    } else {
      PyGILState_STATE g = ensure_gil();
      deliver(*run);
      run.reset();  // drops every reference of the record, GIL held
      PyGILState_Release(g);
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      --in_flight_;
      if (in_flight_ == 0) done_cv_.notify_all();
    }
  }
}

// The future's done-callback: marks the record cancelled when the future was. Its self is a
// capsule holding the record's flag.
void drop_flag(PyObject* capsule) {
  delete static_cast<std::shared_ptr<std::atomic<bool>>*>(
      PyCapsule_GetPointer(capsule, "ortlite.cancel_flag"));
}

PyObject* on_future_done(PyObject* capsule, PyObject* future) {
  auto* flag = static_cast<std::shared_ptr<std::atomic<bool>>*>(
      PyCapsule_GetPointer(capsule, "ortlite.cancel_flag"));
  if (!flag) return nullptr;
  Ref c = Ref::steal(PyObject_CallMethod(future, "cancelled", nullptr));
  if (!c) return nullptr;
  const int yes = PyObject_IsTrue(c.get());
  if (yes < 0) return nullptr;
  if (yes) (*flag)->store(true);
  Py_RETURN_NONE;
}

PyMethodDef kOnFutureDone = {"_on_run_future_done", on_future_done, METH_O, nullptr};

// A Future whose cancel() reaches the run's record.
void watch_cancellation(AsyncRun& run) {
  run.cancelled = std::make_shared<std::atomic<bool>>(false);
  Ref capsule = Ref::steal(PyCapsule_New(new std::shared_ptr<std::atomic<bool>>(run.cancelled),
                                         "ortlite.cancel_flag", drop_flag));
  if (!capsule) throw PythonErrorSet{};
  Ref fn = Ref::steal(PyCFunction_New(&kOnFutureDone, capsule.get()));
  if (!fn) throw PythonErrorSet{};
  Ref r = Ref::steal(PyObject_CallMethod(run.future.get(), "add_done_callback", "O", fn.get()));
  if (!r) throw PythonErrorSet{};
}

}  // namespace

PyObject* session_run_async(PyObject* self, PyObject* args, PyObject* kwds) {
  ModuleState* st = state_of(self);
  if (!st) return nullptr;
  static const char* kwlist[] = {"output_names", "input_feed",  "callback",
                                 "user_data",    "run_options", nullptr};
  PyObject* output_names = nullptr;
  PyObject* input_feed = nullptr;
  PyObject* callback = Py_None;
  PyObject* user_data = Py_None;
  PyObject* run_options = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO|OOO:run_async", const_cast<char**>(kwlist),
                                   &output_names, &input_feed, &callback, &user_data, &run_options))
    return nullptr;
  if (callback != Py_None && !PyCallable_Check(callback)) {
    PyErr_Format(PyExc_TypeError, "callback must be callable or None, not %.100s",
                 Py_TYPE(callback)->tp_name);
    return nullptr;
  }
  try {
    auto run = std::make_unique<AsyncRun>();
    run->st = st;
    run->sess = session_shared(self);
    // Invalid feeds raise here, synchronously, as in run().
    prepare_run(st, *run->sess, output_names, input_feed, run_options, false, true, &run->in);
    run->session_obj = Ref::borrow(self);
    run->run_options = Ref::borrow(run_options);
    run->user_data = Ref::borrow(user_data);
    Ref ret;
    if (callback != Py_None) {
      run->callback = Ref::borrow(callback);
      ret = Ref::borrow(Py_None);
    } else {
      Ref mod = Ref::steal(PyImport_ImportModule("concurrent.futures"));
      if (!mod) throw PythonErrorSet{};
      run->future = Ref::steal(PyObject_CallMethod(mod.get(), "Future", nullptr));
      if (!run->future) throw PythonErrorSet{};
      watch_cancellation(*run);
      ret = Ref::borrow(run->future.get());
    }
    if (!executor().submit(run)) {
      // `run` still owns its references and drops them as this unwinds.
      ORTLITE_THROW(kFail, "run_async: the interpreter is shutting down, no new runs are accepted");
    }
    return ret.release();
  }
  ORTLITE_PY_CATCH(st, nullptr)
}

PyObject* async_shutdown(PyObject*, PyObject*) {
  AsyncExecutor& ex = executor();
  std::deque<std::unique_ptr<AsyncRun>> pending = ex.stop_accepting();
  const size_t cancelled = pending.size();
  for (auto& run : pending) {
    run->error = std::make_exception_ptr(
        Error(StatusCode::kFail, "the run was cancelled: the interpreter is shutting down"));
    deliver(*run);
    run.reset();
  }
  without_gil([&] { ex.drain_and_join(cancelled); });
  Py_RETURN_NONE;
}

PyObject* async_in_flight(PyObject*, PyObject*) {
  return PyLong_FromSize_t(executor().in_flight());
}

void async_reset() {
  executor().reset();
}

}  // namespace ortlite::py
