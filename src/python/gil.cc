#include "python/gil.h"

#include <unistd.h>

namespace ortlite::py {

void park_forever() noexcept {
  for (;;) pause();
}

void take_gil_back(PyThreadState* ts) {
  if (interpreter_finalizing()) park_forever();
  try {
    PyEval_RestoreThread(ts);
  } catch (abi::__forced_unwind&) {
    // Finalization began while this thread waited for the GIL: the unwind ends here,
    // and the handler never returns (returning without a rethrow would abort).
    park_forever();
  }
}

PyGILState_STATE ensure_gil() {
  if (interpreter_finalizing()) park_forever();
  try {
    return PyGILState_Ensure();
  } catch (abi::__forced_unwind&) {
    park_forever();
  }
}

}  // namespace ortlite::py
