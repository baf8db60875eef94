// Indexing and rearrangement kernels added for ONNX node conformance: GatherElements,
// GatherND, ScatterElements, ScatterND, Trilu, OneHot, EyeLike, NonZero, Compress,
// DepthToSpace, SpaceToDepth.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "providers/cpu/tensor/tensor_kernels.h"

namespace ortlite {
namespace {

using tensor_ops::dims_product;

// Reads an int32/int64 index tensor named `what`, failing naming the node otherwise.
std::vector<int64_t> read_indices(const KernelContext& ctx, const Tensor& t, const char* what) {
  if (t.dtype() != DataType::kInt64 && t.dtype() != DataType::kInt32) {
    ctx.fail(
        StatusCode::kInvalidArgument,
        std::string("input '") + what + "' must be int32 or int64, got " + dtype_name(t.dtype()));
  }
  return tensor_to_int64s(t);
}

// Checks index v against [-dim, dim) and returns it in [0, dim).
int64_t fix_index(const KernelContext& ctx, int64_t v, int64_t dim, const char* what, size_t axis) {
  if (v < -dim || v >= dim) {
    ctx.fail(StatusCode::kInvalidArgument, "index " + std::to_string(v) + " in input '" + what +
                                               "' is out of range [" + std::to_string(-dim) + ", " +
                                               std::to_string(dim - 1) + "] on axis " +
                                               std::to_string(axis));
  }
  return v < 0 ? v + dim : v;
}

int64_t resolve_axis(const KernelContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    ctx.fail(StatusCode::kInvalidArgument, "attribute 'axis' = " + std::to_string(axis) +
                                               " is out of range for rank " + std::to_string(rank));
  }
  return axis < 0 ? axis + rank : axis;
}

// For every element of a dense tensor of `shape`, in order, calls fn(flat, offset) where
// offset = sum(index[d] * strides[d]) over d != skip_axis, and index[skip] is returned by
// coord(skip) inside fn through the `idx` vector.
template <typename Fn>
void for_each_index(const Shape& shape, Fn&& fn) {
  const int64_t n = shape_size(shape);
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t flat = 0; flat < n; ++flat) {
    fn(flat, idx);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// ---------------------------------------------------------------------------------------
// GatherElements / ScatterElements

// d[j] = s[ind[j] * stride] for j < n while the indices are in [0, dim); returns where it
// stopped (n when all were). Arguments by value: no store through d can change them.
template <typename T, typename I>
int64_t gather_run(const T* s, const I* ind, T* d, int64_t n, int64_t dim, int64_t stride) {
  for (int64_t j = 0; j < n; ++j) {
    const int64_t v = static_cast<int64_t>(ind[j]);
    if (static_cast<uint64_t>(v) >= static_cast<uint64_t>(dim)) return j;
    d[j] = s[v * stride];
  }
  return n;
}

// d[i] = s[ind[i] * stride + (table ? table[i] : i)] for i < inner; returns whether every
// index was in [0, dim) (one that is not reads element 0 of its column: the caller
// rewrites the run).
template <typename T, typename I>
bool gather_cols(const T* s, const I* ind, T* d, int64_t inner, int64_t dim, int64_t stride,
                 const int64_t* table) {
  bool in_range = true;
  auto at = [&](int64_t i) {
    const uint64_t v = static_cast<uint64_t>(static_cast<int64_t>(ind[i]));
    const bool ok = v < static_cast<uint64_t>(dim);
    in_range &= ok;
    return static_cast<int64_t>(ok ? v : 0) * stride;
  };
  if (table == nullptr) {
    for (int64_t i = 0; i < inner; ++i) d[i] = s[at(i) + i];
  } else {
    for (int64_t i = 0; i < inner; ++i) d[i] = s[at(i) + table[i]];
  }
  return in_range;
}

class GatherElements final : public Kernel {
 public:
  explicit GatherElements(const KernelInfo& info) : axis_(info.attr_int("axis", 0)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Tensor& indices = ctx.required_input(1);
    const Shape& ds = data.shape();
    const Shape& is = indices.shape();
    if (ds.empty() || ds.size() != is.size()) {
      ctx.fail(StatusCode::kInvalidArgument, "inputs 'data' " + shape_to_string(ds) +
                                                 " and 'indices' " + shape_to_string(is) +
                                                 " must have the same rank >= 1");
    }
    const size_t axis = static_cast<size_t>(resolve_axis(ctx, axis_, ds.size()));
    for (size_t d = 0; d < ds.size(); ++d) {
      if (d != axis && is[d] > ds[d]) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'indices' " + shape_to_string(is) +
                                                   " is larger than 'data' " + shape_to_string(ds) +
                                                   " on axis " + std::to_string(d));
      }
    }
    if (indices.dtype() != DataType::kInt64 && indices.dtype() != DataType::kInt32) {
      ctx.fail(StatusCode::kInvalidArgument,
               std::string("input 'indices' must be int32 or int64, got ") +
                   dtype_name(indices.dtype()));
    }
    Tensor& y = ctx.allocate_output(0, data.dtype(), is);
    if (y.numel() == 0) return;
    // The output is walked as rows of indices.shape[axis] x `inner` elements: `rows` over
    // the dims before the axis (each row's data offset from its multi-index), the inner
    // dims either a contiguous run of data (indices span them fully: the common case) or a
    // table of data offsets.
    const std::vector<int64_t> st = tensor_ops::dense_strides(ds);
    const int64_t rows = dims_product(is, 0, axis), n = is[axis], dim = ds[axis];
    const int64_t inner = dims_product(is, axis + 1, is.size()), stride = st[axis];
    bool contiguous = true;
    for (size_t d = axis + 1; d < ds.size(); ++d) contiguous = contiguous && is[d] == ds[d];
    std::vector<int64_t> inner_off;
    if (!contiguous) {
      inner_off.resize(static_cast<size_t>(inner));
      std::vector<int64_t> ix(ds.size(), 0);
      for (int64_t f = 0; f < inner; ++f) {
        int64_t off = 0;
        for (size_t d = axis + 1; d < ds.size(); ++d) off += ix[d] * st[d];
        inner_off[static_cast<size_t>(f)] = off;
        for (size_t d = ds.size(); d-- > axis + 1;) {
          if (++ix[d] < is[d]) break;
          ix[d] = 0;
        }
      }
    }
    auto row_base = [&](int64_t r) {
      int64_t off = 0;
      for (size_t d = axis; d-- > 0;) {
        off += (r % is[d]) * st[d];
        r /= is[d];
      }
      return off;
    };
    auto run = [&](auto tag, auto itag) {
      using T = decltype(tag);
      using I = decltype(itag);
      const T* src = static_cast<const T*>(data.raw_data());
      const I* ind = static_cast<const I*>(indices.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      const int64_t* table = inner_off.data();
      parallel_for(
          ctx.thread_pool(), rows, static_cast<double>(n * inner), [&](int64_t b, int64_t e) {
            for (int64_t r = b; r < e; ++r) {
              const T* s = src + row_base(r);
              const I* ip = ind + r * n * inner;
              T* d = dst + r * n * inner;
              if (inner == 1) {
                const int64_t bad = gather_run(s, ip, d, n, dim, stride);
                for (int64_t j = bad; j < n; ++j) {  // negative or bad indices
                  const int64_t v =
                      fix_index(ctx, static_cast<int64_t>(ip[j]), dim, "indices", axis);
                  d[j] = s[v * stride];
                }
                continue;
              }
              for (int64_t j = 0; j < n; ++j, ip += inner, d += inner) {
                if (gather_cols(s, ip, d, inner, dim, stride, contiguous ? nullptr : table))
                  continue;
                for (int64_t i = 0; i < inner; ++i) {  // negative or bad indices
                  const int64_t v =
                      fix_index(ctx, static_cast<int64_t>(ip[i]), dim, "indices", axis);
                  d[i] = s[v * stride + (contiguous ? i : table[i])];
                }
              }
            }
          });
    };
    tensor_ops::dispatch_storage(data.dtype(), [&](auto tag) {
      if (indices.dtype() == DataType::kInt64) {
        run(tag, int64_t{});
      } else {
        run(tag, int32_t{});
      }
    });
  }

 private:
  int64_t axis_;
};

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Reduction parse_reduction(const KernelInfo& info) {
  const std::string r = info.attr_string("reduction", "none");
  if (r == "none") return Reduction::kNone;
  if (r == "add" && info.opset() >= 16) return Reduction::kAdd;
  if (r == "mul" && info.opset() >= 16) return Reduction::kMul;
  if (r == "max" && info.opset() >= 16) return Reduction::kMax;
  if (r == "min" && info.opset() >= 16) return Reduction::kMin;
  info.fail(StatusCode::kInvalidArgument, "attribute 'reduction' = '" + r +
                                              "' is not supported at opset " +
                                              std::to_string(info.opset()));
}

template <typename T>
void combine(T& dst, const T& v, Reduction r) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    const float a = static_cast<float>(dst), b = static_cast<float>(v);
    switch (r) {
      case Reduction::kNone:
        dst = v;
        break;
      case Reduction::kAdd:
        dst = T(a + b);
        break;
      case Reduction::kMul:
        dst = T(a * b);
        break;
      case Reduction::kMax:
        dst = T(std::max(a, b));
        break;
      case Reduction::kMin:
        dst = T(std::min(a, b));
        break;
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    switch (r) {
      case Reduction::kNone:
        dst = v;
        break;
      case Reduction::kAdd:
      case Reduction::kMax:
        dst = dst || v;
        break;
      case Reduction::kMul:
      case Reduction::kMin:
        dst = dst && v;
        break;
    }
  } else {
    switch (r) {
      case Reduction::kNone:
        dst = v;
        break;
      case Reduction::kAdd:
        dst = static_cast<T>(dst + v);
        break;
      case Reduction::kMul:
        dst = static_cast<T>(dst * v);
        break;
      case Reduction::kMax:
        dst = std::max(dst, v);
        break;
      case Reduction::kMin:
        dst = std::min(dst, v);
        break;
    }
  }
}

// Calls fn(T{}) with the element type of dt: storage types for plain copies, numeric
// types when a reduction combines values.
template <typename Fn>
void dispatch_for(DataType dt, Reduction r, const char* what, Fn&& fn) {
  if (r == Reduction::kNone) {
    tensor_ops::dispatch_storage(dt, fn);
  } else {
    ORTLITE_DISPATCH_NUMERIC(dt, what, fn);
  }
}

class ScatterElements final : public Kernel {
 public:
  explicit ScatterElements(const KernelInfo& info)
      : axis_(info.attr_int("axis", 0)), reduction_(parse_reduction(info)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Tensor& indices = ctx.required_input(1);
    const Tensor& updates = ctx.required_input(2);
    const Shape& ds = data.shape();
    const Shape& is = indices.shape();
    if (ds.empty() || ds.size() != is.size() || is != updates.shape()) {
      ctx.fail(StatusCode::kInvalidArgument,
               "inputs 'data' " + shape_to_string(ds) + ", 'indices' " + shape_to_string(is) +
                   " and 'updates' " + shape_to_string(updates.shape()) +
                   " must have the same rank >= 1, 'indices' and 'updates' the same shape");
    }
    if (updates.dtype() != data.dtype()) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'updates' must have the type of 'data'");
    }
    const size_t axis = static_cast<size_t>(resolve_axis(ctx, axis_, ds.size()));
    for (size_t d = 0; d < ds.size(); ++d) {
      if (d != axis && is[d] > ds[d]) {
        ctx.fail(StatusCode::kInvalidArgument, "input 'indices' " + shape_to_string(is) +
                                                   " is larger than 'data' " + shape_to_string(ds) +
                                                   " on axis " + std::to_string(d));
      }
    }
    std::vector<int64_t> idx = read_indices(ctx, indices, "indices");
    Tensor& y = ctx.allocate_output(0, data.dtype(), ds);
    tensor_ops::copy_elements(data.dtype(), data.raw_data(), y.raw_data(), data.numel());
    if (indices.numel() == 0) return;
    const std::vector<int64_t> st = tensor_ops::dense_strides(ds);
    const Reduction red = reduction_;
    dispatch_for(data.dtype(), red, "ScatterElements", [&](auto tag) {
      using T = decltype(tag);
      const T* upd = static_cast<const T*>(updates.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      for_each_index(is, [&](int64_t flat, const std::vector<int64_t>& ix) {
        int64_t off = 0;
        for (size_t d = 0; d < ix.size(); ++d) {
          const int64_t c =
              d == axis ? fix_index(ctx, idx[static_cast<size_t>(flat)], ds[d], "indices", d)
                        : ix[d];
          off += c * st[d];
        }
        if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, tensor_ops::Bytes16>) {
          dst[off] = upd[flat];
        } else {
          combine(dst[off], upd[flat], red);
        }
      });
    });
  }

 private:
  int64_t axis_;
  Reduction reduction_;
};

// ---------------------------------------------------------------------------------------
// GatherND / ScatterND

class GatherND final : public Kernel {
 public:
  explicit GatherND(const KernelInfo& info) : batch_dims_(info.attr_int("batch_dims", 0)) {
    if (batch_dims_ < 0) info.fail(StatusCode::kInvalidArgument, "attribute 'batch_dims' < 0");
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Tensor& indices = ctx.required_input(1);
    const Shape& ds = data.shape();
    const Shape& is = indices.shape();
    const size_t b = static_cast<size_t>(batch_dims_);
    if (is.empty() || ds.empty() || b >= is.size() || b >= ds.size()) {
      ctx.fail(StatusCode::kInvalidArgument,
               "inputs 'data' " + shape_to_string(ds) + " and 'indices' " + shape_to_string(is) +
                   " must have rank > batch_dims = " + std::to_string(b));
    }
    const int64_t k = is.back();
    if (k < 1 || static_cast<size_t>(k) + b > ds.size()) {
      ctx.fail(StatusCode::kInvalidArgument,
               "the last dim of 'indices' " + shape_to_string(is) +
                   " must be in [1, rank(data) - batch_dims] for 'data' " + shape_to_string(ds));
    }
    for (size_t d = 0; d < b; ++d) {
      if (is[d] != ds[d]) {
        ctx.fail(StatusCode::kInvalidArgument, "the batch dims of 'indices' " +
                                                   shape_to_string(is) + " and 'data' " +
                                                   shape_to_string(ds) + " differ");
      }
    }
    std::vector<int64_t> idx = read_indices(ctx, indices, "indices");
    Shape out(is.begin(), is.end() - 1);
    out.insert(out.end(), ds.begin() + static_cast<std::ptrdiff_t>(b) + k, ds.end());
    tensor_ops::checked_numel(ctx, data.dtype(), out, "GatherND");
    Tensor& y = ctx.allocate_output(0, data.dtype(), out);
    if (y.numel() == 0) return;
    const int64_t batches = dims_product(ds, 0, b);
    const int64_t per_batch = dims_product(is, b, is.size() - 1);  // index tuples per batch
    const int64_t slice = dims_product(ds, b + static_cast<size_t>(k), ds.size());
    const int64_t batch_stride = dims_product(ds, b, ds.size());
    const std::vector<int64_t> st = tensor_ops::dense_strides(ds);
    tensor_ops::dispatch_storage(data.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(data.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      for (int64_t bi = 0; bi < batches; ++bi) {
        for (int64_t j = 0; j < per_batch; ++j) {
          const int64_t* tup = idx.data() + (bi * per_batch + j) * k;
          int64_t off = bi * batch_stride;
          for (int64_t q = 0; q < k; ++q) {
            const size_t d = b + static_cast<size_t>(q);
            off += fix_index(ctx, tup[q], ds[d], "indices", d) * st[d];
          }
          T* o = dst + (bi * per_batch + j) * slice;
          for (int64_t e = 0; e < slice; ++e) o[e] = src[off + e];
        }
      }
    });
  }

 private:
  int64_t batch_dims_;
};

class ScatterND final : public Kernel {
 public:
  explicit ScatterND(const KernelInfo& info) : reduction_(parse_reduction(info)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& data = ctx.required_input(0);
    const Tensor& indices = ctx.required_input(1);
    const Tensor& updates = ctx.required_input(2);
    const Shape& ds = data.shape();
    const Shape& is = indices.shape();
    if (is.empty() || ds.empty()) {
      ctx.fail(StatusCode::kInvalidArgument, "inputs 'data' and 'indices' must have rank >= 1");
    }
    const int64_t k = is.back();
    if (k < 1 || static_cast<size_t>(k) > ds.size()) {
      ctx.fail(StatusCode::kInvalidArgument, "the last dim of 'indices' " + shape_to_string(is) +
                                                 " must be in [1, rank(data)] for 'data' " +
                                                 shape_to_string(ds));
    }
    Shape us(is.begin(), is.end() - 1);
    us.insert(us.end(), ds.begin() + k, ds.end());
    if (updates.shape() != us || updates.dtype() != data.dtype()) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'updates' " + shape_to_string(updates.shape()) +
                                                 " must have shape " + shape_to_string(us) +
                                                 " and the type of 'data'");
    }
    std::vector<int64_t> idx = read_indices(ctx, indices, "indices");
    Tensor& y = ctx.allocate_output(0, data.dtype(), ds);
    tensor_ops::copy_elements(data.dtype(), data.raw_data(), y.raw_data(), data.numel());
    const int64_t n = dims_product(is, 0, is.size() - 1);
    const int64_t slice = dims_product(ds, static_cast<size_t>(k), ds.size());
    const std::vector<int64_t> st = tensor_ops::dense_strides(ds);
    const Reduction red = reduction_;
    dispatch_for(data.dtype(), red, "ScatterND", [&](auto tag) {
      using T = decltype(tag);
      const T* upd = static_cast<const T*>(updates.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      for (int64_t j = 0; j < n; ++j) {
        int64_t off = 0;
        for (int64_t q = 0; q < k; ++q) {
          const size_t d = static_cast<size_t>(q);
          off += fix_index(ctx, idx[static_cast<size_t>(j * k + q)], ds[d], "indices", d) * st[d];
        }
        for (int64_t e = 0; e < slice; ++e) {
          if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, tensor_ops::Bytes16>) {
            dst[off + e] = upd[j * slice + e];
          } else {
            combine(dst[off + e], upd[j * slice + e], red);
          }
        }
      }
    });
  }

 private:
  Reduction reduction_;
};

// ---------------------------------------------------------------------------------------
// Trilu, EyeLike, OneHot, NonZero, Compress

class Trilu final : public Kernel {
 public:
  explicit Trilu(const KernelInfo& info) : upper_(info.attr_int("upper", 1) != 0) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.rank() < 2) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'input' must have rank >= 2, got " + shape_to_string(x.shape()));
    }
    int64_t k = 0;
    if (const Tensor* kt = ctx.input(1)) {
      std::vector<int64_t> kv = read_indices(ctx, *kt, "k");
      if (kv.size() != 1) ctx.fail(StatusCode::kInvalidArgument, "input 'k' must be a scalar");
      k = kv[0];
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    if (y.numel() == 0) return;
    const int64_t rows = x.shape()[x.rank() - 2];
    const int64_t cols = x.shape()[x.rank() - 1];
    const int64_t mats = y.numel() / (rows * cols);
    // Clamping k first keeps i + k from overflowing for huge k; every row is then a copy
    // of its kept column range and a fill of the rest.
    k = std::clamp<int64_t>(k, -rows - 1, cols + 1);
    const bool upper = upper_;
    tensor_ops::dispatch_storage(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(x.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      // Kept columns of row i are [lo, hi): j >= i + k (upper) or j <= i + k (lower).
      const auto kept = [&](int64_t i, int64_t& lo, int64_t& hi) {
        lo = upper ? std::clamp<int64_t>(i + k, 0, cols) : 0;
        hi = upper ? cols : std::clamp<int64_t>(i + k + 1, 0, cols);
      };
      if constexpr (std::is_unsigned_v<T>) {
        if (cols < 64 && rows * cols <= 65536) {
          // Short rows: a copy and three fills a row cost more than the row (rows of 7: a
          // third of onnxruntime's speed). The matrix's pattern, as all-ones and zero
          // elements, is built once and every matrix is the input AND it, flat.
          const int64_t area = rows * cols;
          std::vector<T> mask(static_cast<size_t>(area));
          for (int64_t i = 0; i < rows; ++i) {
            int64_t lo, hi;
            kept(i, lo, hi);
            for (int64_t j = 0; j < cols; ++j)
              mask[static_cast<size_t>(i * cols + j)] =
                  j >= lo && j < hi ? static_cast<T>(~T{0}) : T{0};
          }
          parallel_for(ctx.thread_pool(), mats, static_cast<double>(area),
                       [&](int64_t b, int64_t e) {
                         const T* m = mask.data();
                         for (int64_t t = b; t < e; ++t) {
                           const T* s = src + t * area;
                           T* d = dst + t * area;
                           for (int64_t x = 0; x < area; ++x) d[x] = s[x] & m[x];
                         }
                       });
          return;
        }
      }
      parallel_for(ctx.thread_pool(), mats * rows, static_cast<double>(cols),
                   [&](int64_t b, int64_t e) {
                     int64_t i = b % rows;  // the row within its matrix, stepped below
                     for (int64_t r = b; r < e; ++r, i = i + 1 == rows ? 0 : i + 1) {
                       int64_t lo, hi;
                       kept(i, lo, hi);
                       const T* s = src + r * cols;
                       T* d = dst + r * cols;
                       std::fill(d, d + lo, T{});
                       std::copy(s + lo, s + hi, d + lo);
                       std::fill(d + hi, d + cols, T{});
                     }
                   });
    });
  }

 private:
  bool upper_;
};

class EyeLike final : public Kernel {
 public:
  explicit EyeLike(const KernelInfo& info)
      : dtype_(info.has_attr("dtype") ? static_cast<DataType>(info.attr_int("dtype", 0))
                                      : DataType::kUndefined),
        k_(info.attr_int("k", 0)) {
    if (info.has_attr("dtype") && (!dtype_supported(dtype_) || dtype_ == DataType::kString)) {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'dtype' = " + std::to_string(static_cast<int>(dtype_)) +
                    " is not a supported numeric type");
    }
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.rank() != 2) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'input' must be 2-D, got " + shape_to_string(x.shape()));
    }
    const DataType dt = dtype_ == DataType::kUndefined ? x.dtype() : dtype_;
    Tensor& y = ctx.allocate_output(0, dt, x.shape());
    const int64_t rows = x.shape()[0], cols = x.shape()[1];
    const int64_t k = k_;
    ORTLITE_DISPATCH_NUMERIC(dt, "EyeLike", [&](auto tag) {
      using T = decltype(tag);
      T* dst = static_cast<T*>(y.raw_data());
      // Zero is all-zero bits in every numeric type (float16 and bfloat16 included).
      std::memset(static_cast<void*>(dst), 0, static_cast<size_t>(y.numel()) * sizeof(T));
      if (k < cols && k > -rows) {  // else no diagonal element lies inside
        for (int64_t i = std::max<int64_t>(0, -k); i < rows && i + k < cols; ++i)
          dst[i * cols + i + k] = T(1);
      }
    });
  }

 private:
  DataType dtype_;
  int64_t k_;
};

// Element i of a numeric tensor as int64 (floats truncate toward zero).
std::vector<int64_t> numeric_as_int64s(const Tensor& t, const char* what) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  ORTLITE_DISPATCH_NUMERIC(t.dtype(), what, [&](auto tag) {
    using T = decltype(tag);
    const T* s = static_cast<const T*>(t.raw_data());
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
        v[i] = static_cast<int64_t>(static_cast<float>(s[i]));
      } else {
        v[i] = static_cast<int64_t>(s[i]);
      }
    }
  });
  return v;
}

class OneHot final : public Kernel {
 public:
  explicit OneHot(const KernelInfo& info) : axis_(info.attr_int("axis", -1)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& indices = ctx.required_input(0);
    const Tensor& depth_t = ctx.required_input(1);
    const Tensor& values = ctx.required_input(2);
    if (depth_t.numel() != 1) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'depth' must hold one value, got shape " + shape_to_string(depth_t.shape()));
    }
    if (values.numel() != 2) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'values' must hold 2 values, got shape " + shape_to_string(values.shape()));
    }
    const double dd = tensor_scalar_as_double(depth_t);
    if (!(dd >= 1) || dd > 1e12) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'depth' must be >= 1, got " + std::to_string(dd));
    }
    const int64_t depth = static_cast<int64_t>(dd);
    const int64_t rank = static_cast<int64_t>(indices.rank()) + 1;
    const int64_t axis = resolve_axis(ctx, axis_, rank);
    std::vector<int64_t> idx = numeric_as_int64s(indices, "OneHot indices");
    Shape out = indices.shape();
    out.insert(out.begin() + axis, depth);
    tensor_ops::checked_numel(ctx, values.dtype(), out, "OneHot");
    Tensor& y = ctx.allocate_output(0, values.dtype(), out);
    const int64_t outer = dims_product(indices.shape(), 0, static_cast<size_t>(axis));
    const int64_t inner = dims_product(indices.shape(), static_cast<size_t>(axis), indices.rank());
    tensor_ops::dispatch_storage(values.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* vals = static_cast<const T*>(values.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t d = 0; d < depth; ++d) {
          for (int64_t i = 0; i < inner; ++i) {
            int64_t v = idx[static_cast<size_t>(o * inner + i)];
            if (v < 0) v += depth;
            dst[(o * depth + d) * inner + i] = vals[v == d ? 1 : 0];
          }
        }
      }
    });
  }

 private:
  int64_t axis_;
};

template <typename T>
bool is_nonzero(const T& v) {
  if constexpr (std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>) {
    return static_cast<float>(v) != 0.0f;
  } else {
    return v != T(0);
  }
}

class NonZero final : public Kernel {
 public:
  explicit NonZero(const KernelInfo&) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Shape shape = x.rank() == 0 ? Shape{1} : x.shape();
    const int64_t rank = static_cast<int64_t>(shape.size());
    const int64_t numel = x.numel();
    // Counting first sizes the output exactly; the second pass then writes each row of
    // the last axis' hits branch-free and fills the outer coordinates as runs, so no
    // index is ever divided back into coordinates.
    ORTLITE_DISPATCH_NUMERIC(x.dtype(), "NonZero", [&](auto tag) {
      using T = decltype(tag);
      const T* s = static_cast<const T*>(x.raw_data());
      int64_t nnz = 0;
      for (int64_t i = 0; i < numel; ++i) nnz += is_nonzero(s[i]) ? 1 : 0;
      Tensor& y = ctx.allocate_output(0, DataType::kInt64, {rank, nnz});
      if (nnz == 0) return;
      int64_t* dst = y.data<int64_t>();
      const int64_t inner = shape[static_cast<size_t>(rank - 1)];
      const int64_t outer = numel / inner;
      std::vector<int64_t> hits(static_cast<size_t>(inner));
      std::vector<int64_t> coord(static_cast<size_t>(rank - 1), 0);
      int64_t pos = 0;
      for (int64_t o = 0; o < outer && pos < nnz; ++o) {
        const T* row = s + o * inner;
        int64_t cnt = 0;
        for (int64_t j = 0; j < inner; ++j) {
          hits[static_cast<size_t>(cnt)] = j;
          cnt += is_nonzero(row[j]) ? 1 : 0;
        }
        if (cnt > 0) {
          for (int64_t d = 0; d + 1 < rank; ++d) {
            std::fill(dst + d * nnz + pos, dst + d * nnz + pos + cnt,
                      coord[static_cast<size_t>(d)]);
          }
          std::copy(hits.data(), hits.data() + cnt, dst + (rank - 1) * nnz + pos);
          pos += cnt;
        }
        for (int64_t d = rank - 1; d-- > 0;) {
          if (++coord[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) break;
          coord[static_cast<size_t>(d)] = 0;
        }
      }
    });
  }
};

class Compress final : public Kernel {
 public:
  explicit Compress(const KernelInfo& info)
      : has_axis_(info.has_attr("axis")), axis_(info.attr_int("axis", 0)) {}

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    const Tensor& cond = ctx.required_input(1);
    if (cond.dtype() != DataType::kBool || cond.rank() != 1) {
      ctx.fail(StatusCode::kInvalidArgument, "input 'condition' must be a 1-D bool tensor");
    }
    const bool* c = cond.data<bool>();
    Shape in = has_axis_ ? x.shape() : Shape{x.numel()};
    if (in.empty()) ctx.fail(StatusCode::kInvalidArgument, "input 'input' must have rank >= 1");
    const size_t axis = static_cast<size_t>(resolve_axis(ctx, axis_, in.size()));
    const int64_t dim = in[axis];
    if (cond.numel() > dim) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'condition' has " + std::to_string(cond.numel()) +
                   " entries, more than the " + std::to_string(dim) + " slices on the axis");
    }
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < cond.numel(); ++i) {
      if (c[i]) keep.push_back(i);
    }
    Shape out = in;
    out[axis] = static_cast<int64_t>(keep.size());
    Tensor& y = ctx.allocate_output(0, x.dtype(), out);
    if (y.numel() == 0) return;
    const int64_t outer = dims_product(in, 0, axis);
    const int64_t inner = dims_product(in, axis + 1, in.size());
    const int64_t n = static_cast<int64_t>(keep.size());
    tensor_ops::dispatch_storage(x.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* src = static_cast<const T*>(x.raw_data());
      T* dst = static_cast<T*>(y.raw_data());
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < n; ++j) {
          const T* s = src + (o * dim + keep[static_cast<size_t>(j)]) * inner;
          T* d = dst + (o * n + j) * inner;
          for (int64_t e = 0; e < inner; ++e) d[e] = s[e];
        }
      }
    });
  }

 private:
  bool has_axis_;
  int64_t axis_;
};

// ---------------------------------------------------------------------------------------
// DepthToSpace / SpaceToDepth: a reshape, a transpose and a reshape, as one strided copy.

// SpaceToDepth of fixed-size elements: each input row of a block row is dealt out to its
// `b` output planes in one pass, so every input element is read once and each output row
// is written sequentially. kB is the block size when known at compile time, 0 otherwise.
template <typename E, int kB>
void space_to_depth_rows(const E* src, E* dst, int64_t n, int64_t c, int64_t h, int64_t w,
                         int64_t b, ThreadPool* pool) {
  if constexpr (kB != 0) b = kB;
  const int64_t oh = h / b, ow = w / b;
  const int64_t plane = oh * ow;
  parallel_for(pool, n * c * oh, static_cast<double>(b * w), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t y = t % oh, nc = t / oh, ci = nc % c, ni = nc / c;
      for (int64_t bh = 0; bh < b; ++bh) {
        const E* s = src + ((nc * h) + y * b + bh) * w;
        // Output channel (bh * b + bw) * c + ci of image ni, row y.
        E* d = dst + ((ni * b * b + bh * b) * c + ci) * plane + y * ow;
        const int64_t dstep = c * plane;
        if constexpr (kB == 2) {
          E* d0 = d;
          E* d1 = d + dstep;
          for (int64_t x = 0; x < ow; ++x) {
            d0[x] = s[2 * x];
            d1[x] = s[2 * x + 1];
          }
        } else {
          // The input row stays in L1 while each output row is written in order.
          for (int64_t bw = 0; bw < b; ++bw) {
            E* db = d + bw * dstep;
            const E* sb = s + bw;
            for (int64_t x = 0; x < ow; ++x) db[x] = sb[x * b];
          }
        }
      }
    }
  });
}

template <typename E>
void space_to_depth(const void* src, void* dst, int64_t n, int64_t c, int64_t h, int64_t w,
                    int64_t b, ThreadPool* pool) {
  const E* s = static_cast<const E*>(src);
  E* d = static_cast<E*>(dst);
  if (b == 2) return space_to_depth_rows<E, 2>(s, d, n, c, h, w, b, pool);
  if (b == 4) return space_to_depth_rows<E, 4>(s, d, n, c, h, w, b, pool);
  space_to_depth_rows<E, 0>(s, d, n, c, h, w, b, pool);
}

// DepthToSpace of fixed-size elements, the mirror image: each output row interleaves the
// matching rows of its `b` source channels (DCR: channel (bh * b + bw) * c2 + ci, CRD:
// ci * b * b + bh * b + bw), written in order.
template <typename E, int kB>
void depth_to_space_rows(const E* src, E* dst, int64_t n, int64_t c2, int64_t h, int64_t w,
                         int64_t b, bool crd, ThreadPool* pool) {
  if constexpr (kB != 0) b = kB;
  const int64_t c = c2 * b * b, ow = w * b;
  parallel_for(pool, n * c2 * h, static_cast<double>(b * ow), [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t y = t % h, nc = t / h, ci = nc % c2, ni = nc / c2;
      for (int64_t bh = 0; bh < b; ++bh) {
        E* d = dst + (nc * h * b + y * b + bh) * ow;
        const int64_t ch0 = crd ? ci * b * b + bh * b : bh * b * c2 + ci;
        const int64_t chstep = crd ? 1 : c2;
        const E* s = src + ((ni * c + ch0) * h + y) * w;
        const int64_t sstep = chstep * h * w;
        if constexpr (kB == 2) {
          const E* s0 = s;
          const E* s1 = s + sstep;
          for (int64_t x = 0; x < w; ++x) {
            d[2 * x] = s0[x];
            d[2 * x + 1] = s1[x];
          }
        } else {
          for (int64_t bw = 0; bw < b; ++bw) {
            const E* sb = s + bw * sstep;
            E* db = d + bw;
            for (int64_t x = 0; x < w; ++x) db[x * b] = sb[x];
          }
        }
      }
    }
  });
}

template <typename E>
void depth_to_space(const void* src, void* dst, int64_t n, int64_t c2, int64_t h, int64_t w,
                    int64_t b, bool crd, ThreadPool* pool) {
  const E* s = static_cast<const E*>(src);
  E* d = static_cast<E*>(dst);
  if (b == 2) return depth_to_space_rows<E, 2>(s, d, n, c2, h, w, b, crd, pool);
  if (b == 4) return depth_to_space_rows<E, 4>(s, d, n, c2, h, w, b, crd, pool);
  depth_to_space_rows<E, 0>(s, d, n, c2, h, w, b, crd, pool);
}

class DepthSpace final : public Kernel {
 public:
  DepthSpace(const KernelInfo& info, bool to_space)
      : to_space_(to_space), block_(info.attr_int_required("blocksize")) {
    if (block_ < 1) info.fail(StatusCode::kInvalidArgument, "attribute 'blocksize' must be >= 1");
    const std::string mode = info.attr_string("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") {
      info.fail(StatusCode::kInvalidArgument,
                "attribute 'mode' = '" + mode + "' must be DCR or CRD");
    }
    crd_ = to_space && mode == "CRD";
  }

  void compute(KernelContext& ctx) const override {
    const Tensor& x = ctx.required_input(0);
    if (x.rank() != 4) {
      ctx.fail(StatusCode::kInvalidArgument,
               "input 'input' must be 4-D (N, C, H, W), got " + shape_to_string(x.shape()));
    }
    const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), b = block_;
    Shape split, perm_shape;
    std::vector<int64_t> perm;
    Shape out;
    if (to_space_) {
      if (c % (b * b) != 0) {
        ctx.fail(StatusCode::kInvalidArgument,
                 "the channel count " + std::to_string(c) + " is not a multiple of blocksize^2");
      }
      const int64_t c2 = c / (b * b);
      if (crd_) {
        split = {n, c2, b, b, h, w};
        perm = {0, 1, 4, 2, 5, 3};
      } else {
        split = {n, b, b, c2, h, w};
        perm = {0, 3, 4, 1, 5, 2};
      }
      out = {n, c2, h * b, w * b};
    } else {
      if (h % b != 0 || w % b != 0) {
        ctx.fail(StatusCode::kInvalidArgument, "the spatial dims of " + shape_to_string(x.shape()) +
                                                   " are not multiples of blocksize");
      }
      split = {n, c, h / b, b, w / b, b};
      perm = {0, 3, 5, 1, 2, 4};
      out = {n, c * b * b, h / b, w / b};
    }
    Tensor& y = ctx.allocate_output(0, x.dtype(), out);
    if (y.numel() == 0) return;
    if (to_space_ && x.dtype() != DataType::kString) {
      const int64_t c2 = c / (b * b);
      switch (dtype_size(x.dtype())) {
        case 1:
          return depth_to_space<uint8_t>(x.raw_data(), y.raw_data(), n, c2, h, w, b, crd_,
                                         ctx.thread_pool());
        case 2:
          return depth_to_space<uint16_t>(x.raw_data(), y.raw_data(), n, c2, h, w, b, crd_,
                                          ctx.thread_pool());
        case 4:
          return depth_to_space<uint32_t>(x.raw_data(), y.raw_data(), n, c2, h, w, b, crd_,
                                          ctx.thread_pool());
        case 8:
          return depth_to_space<uint64_t>(x.raw_data(), y.raw_data(), n, c2, h, w, b, crd_,
                                          ctx.thread_pool());
        default:
          break;
      }
    }
    if (!to_space_ && x.dtype() != DataType::kString) {
      switch (dtype_size(x.dtype())) {
        case 1:
          return space_to_depth<uint8_t>(x.raw_data(), y.raw_data(), n, c, h, w, b,
                                         ctx.thread_pool());
        case 2:
          return space_to_depth<uint16_t>(x.raw_data(), y.raw_data(), n, c, h, w, b,
                                          ctx.thread_pool());
        case 4:
          return space_to_depth<uint32_t>(x.raw_data(), y.raw_data(), n, c, h, w, b,
                                          ctx.thread_pool());
        case 8:
          return space_to_depth<uint64_t>(x.raw_data(), y.raw_data(), n, c, h, w, b,
                                          ctx.thread_pool());
        default:
          break;
      }
    }
    const std::vector<int64_t> st = tensor_ops::dense_strides(split);
    std::vector<int64_t> src_strides(6);
    for (size_t i = 0; i < 6; ++i) {
      perm_shape.push_back(split[static_cast<size_t>(perm[i])]);
      src_strides[i] = st[static_cast<size_t>(perm[i])];
    }
    tensor_ops::strided_copy_dense(x.dtype(), x.raw_data(), src_strides, y.raw_data(), perm_shape,
                                   ctx.thread_pool());
  }

 private:
  bool to_space_;
  int64_t block_;
  bool crd_ = false;
};

}  // namespace

void register_gather_scatter_nd_kernels(KernelRegistry& r) {
  r.add_versions("GatherElements", {11, 13}, make_factory<GatherElements>());
  r.add("", "Scatter", 9, 10, make_factory<ScatterElements>());  // ScatterElements' ancestor
  r.add_versions("ScatterElements", {11, 13, 16, 18}, make_factory<ScatterElements>());
  r.add_versions("GatherND", {11, 12, 13}, make_factory<GatherND>());
  r.add_versions("ScatterND", {11, 13, 16, 18}, make_factory<ScatterND>());
  r.add_versions("Trilu", {14}, make_factory<Trilu>());
  // com.microsoft's Trilu and GatherND (no batch_dims) are the default-domain ops.
  r.add("com.microsoft", "Trilu", 1, kMaxOpset, make_factory<Trilu>());
  r.add("com.microsoft", "GatherND", 1, kMaxOpset, make_factory<GatherND>());
  r.add_versions("EyeLike", {9, 22}, make_factory<EyeLike>());
  r.add_versions("OneHot", {9, 11}, make_factory<OneHot>());
  r.add_versions("NonZero", {9, 13}, make_factory<NonZero>());
  r.add_versions("Compress", {9, 11}, make_factory<Compress>());
  r.add_versions("DepthToSpace", {1, 11, 13}, [](const KernelInfo& info) {
    return std::unique_ptr<Kernel>(new DepthSpace(info, true));
  });
  r.add_versions("SpaceToDepth", {1, 13}, [](const KernelInfo& info) {
    return std::unique_ptr<Kernel>(new DepthSpace(info, false));
  });
}

}  // namespace ortlite
