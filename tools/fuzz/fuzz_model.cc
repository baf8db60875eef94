// libFuzzer harness over ortlite's model loading path: the protobuf reader
// (load_model_from_buffer), the graph checks and kernel creation (Session::create), and,
// when a session loads, one run with zero-filled inputs of the declared shapes (symbolic or
// unknown dims set to 1, total input bytes capped). A typed ortlite::Error is an accepted
// outcome; anything else (sanitizer report, other exception, timeout, OOM) is a finding.
//
// Built by `make fuzz` (tools/fuzz/build.sh) straight from src/core and src/providers/cpu.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "ortlite/buffer.h"
#include "ortlite/model.h"
#include "ortlite/session.h"
#include "ortlite/status.h"
#include "ortlite/tensor.h"

namespace {

constexpr uint64_t kMaxFeedBytes = 1 << 20;  // total bytes of all zero-filled feeds
constexpr int64_t kMaxFeedRank = 8;

// Builds zero-filled feeds for the session's inputs; false when they would be too large
// or an input is not a plain tensor (the run is then skipped, not failed).
bool make_feeds(const ortlite::Session& s, ortlite::Feeds* feeds) {
  uint64_t total = 0;
  for (const ortlite::ValueInfo& vi : s.inputs()) {
    if (vi.type.kind != ortlite::TypeInfo::Kind::kTensor) return false;
    const size_t elem = ortlite::dtype_size(vi.type.elem_type);
    if (elem == 0 || !ortlite::dtype_supported(vi.type.elem_type)) return false;
    if (static_cast<int64_t>(vi.type.dims.size()) > kMaxFeedRank) return false;
    ortlite::Shape shape;
    uint64_t n = 1;
    for (const ortlite::Dim& d : vi.type.dims) {
      int64_t v = d.has_value ? d.value : 1;
      if (v < 0) return false;
      shape.push_back(v);
      if (v != 0 && n > kMaxFeedBytes / static_cast<uint64_t>(v)) return false;
      n *= static_cast<uint64_t>(v);
    }
    if (n > kMaxFeedBytes / elem) return false;
    total += n * elem;
    if (total > kMaxFeedBytes) return false;
    feeds->emplace_back(vi.name, ortlite::Tensor::empty(vi.type.elem_type, shape));
  }
  return true;
}

}  // namespace

extern "C" const char* __asan_default_options() {
  // A single allocation above 256 MiB returns null, which Buffer::allocate turns into a
  // typed error: a model may legitimately ask for a huge tensor (Expand to [1e8, 1, 2]),
  // and filling it would only show up as a timeout. operator new above the limit still
  // aborts: an unchecked size from the input reached a container, a finding.
  return "allocator_may_return_null=1:max_allocation_size_mb=256:detect_leaks=1";
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Copy into an exactly-sized owned buffer so reads past the end are caught by ASan.
  ortlite::BufferPtr bytes = ortlite::BufferPtr::adopt(ortlite::Buffer::allocate(size));
  if (size) std::memcpy(bytes->data(), data, size);
  try {
    ortlite::Model model = ortlite::load_model_from_buffer(bytes, "");
    ortlite::SessionConfig config;
    config.intra_op_num_threads = 1;
    std::shared_ptr<const ortlite::Session> session =
        ortlite::Session::create(std::move(model), config);
    ortlite::Feeds feeds;
    if (!make_feeds(*session, &feeds)) return 0;
    std::vector<ortlite::Tensor> outs;
    for (const ortlite::Value& v : session->run(feeds, {}, nullptr)) {
      if (v.is_tensor()) outs.push_back(v.tensor());
      for (const ortlite::Tensor& t : v.items()) outs.push_back(t);
    }
    // Touch the outputs so a bad buffer/shape pairing is seen by ASan.
    volatile uint8_t sink = 0;
    for (const ortlite::Tensor& t : outs) {
      if (t.dtype() == ortlite::DataType::kString) continue;
      const size_t nb = t.nbytes();
      if (nb)
        sink = sink ^ static_cast<const uint8_t*>(t.raw_data())[0] ^
               static_cast<const uint8_t*>(t.raw_data())[nb - 1];
    }
    (void)sink;
  } catch (const ortlite::Error&) {
    // Typed error: the expected outcome for bad input.
  }
  return 0;
}
