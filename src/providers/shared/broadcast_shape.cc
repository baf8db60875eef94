#include "providers/shared/broadcast_shape.h"

#include <algorithm>

namespace ortlite {

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* what) {
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      ORTLITE_THROW(kInvalidArgument, what, ": shapes ", shape_to_string(a), " and ",
                    shape_to_string(b), " cannot be broadcast together");
    }
  }
  return out;
}

std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  const size_t lead = out.size() - in.size();
  for (size_t i = in.size(); i-- > 0;) {
    strides[lead + i] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
  return strides;
}

bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t d = from[from.size() - 1 - i];
    const int64_t t = to[to.size() - 1 - i];
    if (d != t && d != 1) return false;
  }
  return true;
}

}  // namespace ortlite
