// Driver of the fused GEMM (fused_gemm.h): packing, cache blocking, threading.
//
// Loop order, per task (a range of C's column panels, or of its row blocks when there are
// few columns):
//   for k0 in K step KC:           A rows x KC stays in L2
//     for each 32-column panel:    B panel (KC x 32), streamed (prefetched) from L2
//       for each row block:        micro-kernel on a (<= 12) x 32 tile; with the last k
//                                  block, the epilogue before the store
// Row blocks are as even as possible (64 rows: 11, 11, 10, 11, 11, 10), so that no tile runs
// mostly empty; when A is a packed W they stay inside its 32-row panels. Activations the
// micro-kernel cannot apply in registers (Sigmoid, Tanh, HardSigmoid, Gelu) run on the
// task's block of C right after it is finished, while it is in cache.
#include "compute/fused_gemm.h"

#include "compute/conv_avx512.h"
#include "compute/gemm.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "ortlite/buffer.h"

namespace ortlite {
namespace nn {
namespace fgemm {

namespace {

// 0: no fused GEMM, 1: AVX2 + FMA, 2: AVX-512F, 3: AVX-512F and AMX-BF16 tiles;
// ORTLITE_GEMM_ISA caps it (the tile state is asked for only where they would be used).
int isa_level() {
  static const int level = [] {
    int cap = 3;
    if (const char* env = std::getenv("ORTLITE_GEMM_ISA")) {
      const std::string s(env);
      if (s == "sse2" || s == "generic") cap = 0;
      if (s == "avx2") cap = 1;
      if (s == "avx512") cap = 2;
    }
    int l = cpu_has_avx512() ? 2 : cpu_has_avx2_fma() ? 1 : 0;
    if (l == 2 && cap == 3 && amx::available_on_cpu()) l = 3;
    return std::min(l, cap);
  }();
  return level;
}

// Whether a product runs on the AMX tiles: smaller ones stay on the FMA kernel, where the
// split of A, the tile configuration and half-empty tiles cost more than the tiles save.
bool amx_size(int64_t M, int64_t N, int64_t K, ThreadPool* pool) {
  const int threads = pool ? pool->num_threads() : 1;
  return M >= 64 && N >= 128 && K >= 128 &&
         static_cast<double>(M) * N * K >= 6e6 * static_cast<double>(threads);
}

// The same for W on the left (a convolution: M output channels, N positions), where X is
// split per call: its split costs as much as about 37 multiply-adds per element on the
// tiles, too much beside M = 128 products (ResNet-18's 3x3 stride-2 64 -> 128: 10% slower).
bool amx_size_w_left(int64_t M, int64_t N, int64_t K, ThreadPool* pool) {
  return M >= 256 && amx_size(M, N, K, pool);
}

void tile(const TileArgs& t) {
  if (isa_level() >= 2) {
    tile_avx512(t);
  } else {
    tile_avx2(t);
  }
}

constexpr std::align_val_t kAlign{64};
constexpr int64_t kCopyA = 16;  // floats a k step in run_block's copy of A

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

struct RowBlock {
  int64_t start, rows;
};

// Rows [0, M) in blocks of at most 12, as even as possible within each group of `group`
// rows (a packed W's 32-row panel; M for a strided A).
std::vector<RowBlock> row_blocks(int64_t M, int64_t group) {
  std::vector<RowBlock> b;
  for (int64_t g0 = 0; g0 < M; g0 += group) {
    const int64_t n = std::min(group, M - g0), count = ceil_div(n, kMR);
    const int64_t base = n / count, extra = n % count;
    int64_t r = g0;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t h = base + (i < extra ? 1 : 0);
      b.push_back({r, h});
      r += h;
    }
  }
  return b;
}

uint64_t new_serial() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

// A: row block starting at row m, at k0: a_packed ? W panel (m / 32) + k0 * 32 + m % 32
// (a_rs 1, a_ks 32) : a + m * a_rs + k0 * a_ks. B: panel j at k0: b + j * b_panel + k0 * b_ks.
struct Problem {
  int64_t M, N, K;
  std::vector<RowBlock> blocks;
  const float* a;
  bool a_packed;
  int64_t a_rs, a_ks;
  const float* b;
  int64_t b_panel, b_ks;
  float* C;
  int64_t ldc;
  const Epilogue* ep;
  const int64_t* b_off = nullptr;  // B row k at b + b_off[k] (+ the panel's columns)
  bool accumulate = false;         // C holds partial sums to add to
  const std::function<void(int64_t, int64_t)>* cols_done = nullptr;  // gemm_w_right's
  uint64_t serial = new_serial();  // tells one product from the next (copy_of_a)
};

// Columns [j0, j1) (panels) of every row are done: p.cols_done, where given.
void cols_done(const Problem& p, int64_t j0, int64_t j1) {
  if (p.cols_done && j1 > j0) (*p.cols_done)(j0 * kNR, std::min(p.N, j1 * kNR));
}

void fill_act(const Epilogue& ep, TileArgs& t) {
  t.act = 0;
  t.lo = 0.f;
  t.hi = 0.f;
  switch (ep.act.kind) {
    case ActKind::kRelu:
      t.act = 1;
      t.lo = 0.f;
      t.hi = __builtin_inff();
      break;
    case ActKind::kClip:
      t.act = 1;
      t.lo = ep.act.p0;
      t.hi = ep.act.p1;
      break;
    case ActKind::kLeakyRelu:
      t.act = 2;
      t.lo = ep.act.p0;
      break;
    default:
      break;
  }
}

bool act_in_registers(const ActSpec& a) {
  return a.kind == ActKind::kNone || a.kind == ActKind::kRelu || a.kind == ActKind::kClip ||
         a.kind == ActKind::kLeakyRelu;
}

// Whether B is a packed W (panel j's k block ks one contiguous run of k * 32 floats): all of
// its depth, or rows [k0, k1) of it with the panels' full depth as their stride
// (gemm_w_right_k: the halves of K of a 3x3 convolution's product at 2 threads, whose panels
// were read without the prefetch below, 4-8% slower).
bool b_packed(const Problem& p) {
  return p.b_ks == kNR && p.b_panel >= p.K * kNR;
}

// Row blocks [i0, i1) of A copied k-major, kCopyA floats a k step (row r of block i at
// [((i - i0) * K + k) * kCopyA + r]), for run_block. Kept per thread for the product it was
// made for: the ranges or claims of panels a thread takes of one product share it.
const float* copy_of_a(const Problem& p, int64_t i0, int64_t i1) {
  struct Copy {
    std::vector<float> data;
    uint64_t serial = 0;
    int64_t i0 = -1, i1 = -1;
  };
  thread_local Copy c;
  if (c.serial == p.serial && c.i0 == i0 && c.i1 == i1) return c.data.data();
  const size_t need = static_cast<size_t>((i1 - i0) * kCopyA * p.K);
  if (c.data.size() < need) c.data.resize(need);
  for (int64_t i = i0; i < i1; ++i) {
    const float* src = p.a + p.blocks[i].start * p.a_rs;
    float* dst = c.data.data() + (i - i0) * kCopyA * p.K;
    const int rows = static_cast<int>(p.blocks[i].rows);
    for (int64_t k = 0; k < p.K; k += 16)
      cvx::transpose16(src + k, p.a_rs, rows, static_cast<int>(std::min<int64_t>(16, p.K - k)),
                       dst + k * kCopyA, kCopyA);
  }
  c.serial = p.serial;
  c.i0 = i0;
  c.i1 = i1;
  return c.data.data();
}

// Row blocks [i0, i1) x column panels [j0, j1) of C. `after`: the first column panel this
// thread computes after these (-1: none).
void run_block(const Problem& p, int64_t i0, int64_t i1, int64_t j0, int64_t j1, int64_t after) {
  const Epilogue& ep = *p.ep;
  TileArgs t{};
  fill_act(ep, t);
  t.alpha = ep.alpha;
  t.ldc = p.ldc;
  t.ldz = ep.ldz;
  t.b_ks = p.b_ks;
  t.a_rs = p.a_packed ? 1 : p.a_rs;
  t.a_ks = p.a_packed ? kNR : p.a_ks;
  const int64_t n0 = j0 * kNR, n1 = std::min(p.N, j1 * kNR);
  // A packed B's next block is prefetched into L2 while the current panel is computed (one
  // line per k step, its lines shared out over the row blocks), so that the micro-kernel
  // streams B from L2 instead of waiting on L3. With a single row block B is read once, at
  // a rate the hardware prefetcher keeps up with (the panels follow each other in memory),
  // and the extra prefetches only slow it (M = 4..12: 1-14%). A B read in place (a
  // convolution's input) is left to the hardware prefetcher too.
  const bool prefetch = i1 - i0 >= 2 && b_packed(p);
  // A read in place with its rows a multiple of 4 KiB apart (K = 1024, 2048, 3072, ...:
  // BERT's FFN output, 128 x 3072 @ 3072 x 768) put a tile's rows in one set of the 8-way
  // L1, and with more than 8 rows every broadcast missed. Such an A is copied first
  // (copy_of_a: one line a k step), once for all of the panels: the same products in the
  // same order.
  const bool copy_a = !p.a_packed && p.a_ks == 1 && !p.b_off && p.a_rs > 0 &&
                      (p.a_rs * 4) % 4096 == 0 && p.blocks[i0].rows > 8 && p.N > kNR &&
                      isa_level() >= 2;
  const float* a_copy = copy_a ? copy_of_a(p, i0, i1) : nullptr;
  if (copy_a) {
    t.a_rs = 1;
    t.a_ks = kCopyA;
    t.a_copied = true;
  }
  // K == 0: one pass of the epilogue over zeros.
  const int64_t ksteps = std::max<int64_t>(1, ceil_div(p.K, kKC));
  auto panel = [&](int64_t ks, int64_t j, bool pair) {
    const int64_t k0 = ks * kKC;
    t.k = std::min(kKC, p.K - k0);
    t.accumulate = k0 > 0 || p.accumulate;
    t.last = ks + 1 == ksteps;
    const int64_t n = j * kNR;
    t.cols = static_cast<int>(std::min(kNR, p.N - n));
    t.b = p.b + j * p.b_panel + k0 * p.b_ks;
    t.b_off = p.b_off ? p.b_off + k0 : nullptr;
    t.bias_col = ep.bias_col ? ep.bias_col + n : nullptr;
    // The B block this thread needs next: the next panel, else the first panel at the
    // next k block, else `after` at k = 0.
    const float* next = nullptr;
    int64_t next_k = 0;
    if (j + 1 < j1) {
      next = t.b + p.b_panel;
      next_k = t.k;
    } else if (ks + 1 < ksteps) {
      next = p.b + j0 * p.b_panel + (k0 + kKC) * p.b_ks;
      next_k = std::min(kKC, p.K - k0 - kKC);
    } else if (after >= 0) {
      next = p.b + after * p.b_panel;
      next_k = std::min(kKC, p.K);
    }
    const int64_t lines = prefetch && next ? next_k * kNR * 4 / 64 : 0;
    const int64_t share = ceil_div(lines, i1 - i0);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t m = p.blocks[i].start;
      t.rows = static_cast<int>(p.blocks[i].rows);
      t.a = copy_a       ? a_copy + ((i - i0) * p.K + k0) * kCopyA
            : p.a_packed ? p.a + (m / kNR) * p.K * kNR + k0 * kNR + m % kNR
                         : p.a + m * p.a_rs + k0 * p.a_ks;
      t.c = p.C + m * p.ldc + n;
      t.bias_row = ep.bias_row ? ep.bias_row + m : nullptr;
      t.z = ep.z ? ep.z + m * ep.ldz + n : nullptr;
      const int64_t first = (i - i0) * share;
      t.pf_lines = std::min(share, lines - first);
      t.pf = t.pf_lines > 0 ? next + first * 16 : nullptr;
      if (pair) {
        tile_row_pair_avx512(t, t.b + p.b_panel);
      } else {
        tile(t);
      }
    }
  };
  // One row block (at most 12 rows) reads B once: then each packed panel goes through all of
  // its k blocks before the next panel, so that B streams through memory in order (the
  // panels follow each other) instead of a k block of every panel at a time, a jump of the
  // rest of the panel between them. The same sums in the same order per output. 1 thread,
  // against k block by k block: 1 x 1280 @ 1280 x 1000 (MobileNetV2's classifier) 0.90 of
  // the time, 1 x 4096 @ 4096 x 1024 0.92, 8 x 2048 @ 2048 x 1000 0.98; 2 threads (each
  // thread's half of B in its L2) within noise.
  // One to three rows (a batch-1 product on AVX-512) take two full panels at a time
  // (tile_row_pair_avx512), in the same order.
  const bool pairs = i1 - i0 == 1 && p.blocks[i0].rows <= 3 && !p.b_off && isa_level() >= 2;
  if (pairs || (i1 - i0 == 1 && ksteps > 1 && b_packed(p))) {
    for (int64_t j = j0; j < j1;) {
      const bool two = pairs && j + 1 < j1 && (j + 2) * kNR <= p.N;
      for (int64_t ks = 0; ks < ksteps; ++ks) panel(ks, j, two);
      j += two ? 2 : 1;
    }
  } else {
    for (int64_t ks = 0; ks < ksteps; ++ks)
      for (int64_t j = j0; j < j1; ++j) panel(ks, j, false);
  }
  if (!act_in_registers(ep.act)) {
    const int64_t m0 = p.blocks[i0].start, m1 = p.blocks[i1 - 1].start + p.blocks[i1 - 1].rows;
    for (int64_t i = m0; i < m1; ++i) apply_act_f32(ep.act, p.C + i * p.ldc + n0, n1 - n0);
  }
}

void run(const Problem& p, ThreadPool* pool) {
  if (p.M == 0 || p.N == 0) return;
  const int64_t mb = static_cast<int64_t>(p.blocks.size()), nb = ceil_div(p.N, kNR);
  const int threads = pool ? pool->num_threads() : 1;
  const double work = 2.0 * static_cast<double>(p.M) * p.N * std::max<int64_t>(p.K, 1);
  // Split the columns when there are enough panels for every thread, else the rows.
  const bool by_cols = nb >= 2 * threads || nb >= mb;
  const int64_t units = by_cols ? nb : mb;
  // Under ~2 MFLOP (about 13 us on one core) a product runs on the calling thread: split,
  // the hand-off and the other core's cache misses on A and C cost more than they save (the
  // demo CNN's 16-channel convolutions, 0.3-1.2 MFLOP each: 125 us per run at 2 threads
  // against 97 at 1 with a 0.2 MFLOP threshold, 95 with this one).
  // A product of few rows reads more than it computes: with 1 MiB or more of operands it
  // is split whatever its FLOPs, for the other core's share of the memory bandwidth
  // (ResNet-18's classifier, 1 x 512 x 1000 with 2 MiB of weights, at 2 threads: 57 -> 21
  // us alone, 139 -> 74 us inside the network).
  const double bytes = 4.0 * (static_cast<double>(p.M) * p.K + static_cast<double>(p.K) * p.N);
  if (threads == 1 || units == 1 || (work < 2e6 && bytes < 1048576.0)) {
    run_block(p, 0, mb, 0, nb, -1);
    cols_done(p, 0, nb);
    return;
  }
  // One unit per claim once a unit is worth >= ~20 us: the threads then finish within one
  // unit of each other (else the pool's ranges of about units / (4 threads)).
  const bool one_each = work / static_cast<double>(units) >= 2e6;
  const int64_t chunk = one_each ? 1 : std::max<int64_t>(1, units / (4 * threads));
  // Column panels of a packed B with row blocks to share its prefetch, >= 4 claims per
  // thread: each thread claims its next run of panels before it computes the current one,
  // so that run_block can prefetch that run's B. (With fewer claims, a claim held ahead
  // could leave a late-starting thread idle.) Not where a consumer runs on each finished
  // run of columns (cols_done: a transposed convolution's copy back, MobileNetV2's
  // depthwise step after its 1x1 expansion): there the pool's contiguous segments give
  // each thread one half of the channels, the half the next layer's thread reads (a
  // projection split over its input channels), where the claims interleaved them and half
  // of each thread's input came from the other core. MobileNetV2 at 2 threads: 0.98-0.99
  // of the time (paired runs), ddddocr's common_det 0.97, ResNet-18 and nudenet within
  // noise.
  if (!by_cols || mb < 2 || !b_packed(p) || ceil_div(units, chunk) < 4 * threads || p.cols_done) {
    pool->parallel_for(
        units,
        [&](int64_t s, int64_t e) {
          if (by_cols) {
            run_block(p, 0, mb, s, e, -1);
            cols_done(p, s, e);
          } else {
            run_block(p, s, e, 0, nb, -1);
          }
        },
        one_each ? 1 : 0);
    if (!by_cols) cols_done(p, 0, nb);
    return;
  }
  std::atomic<int64_t> next{0};
  pool->parallel_for(
      threads,
      [&](int64_t, int64_t) {
        int64_t cur = next.fetch_add(chunk, std::memory_order_relaxed);
        while (cur < nb) {
          const int64_t ahead = next.fetch_add(chunk, std::memory_order_relaxed);
          run_block(p, 0, mb, cur, std::min(nb, cur + chunk), ahead < nb ? ahead : -1);
          cols_done(p, cur, std::min(nb, cur + chunk));
          cur = ahead;
        }
      },
      1);
}

}  // namespace

bool available() {
  return isa_level() >= 1;
}

bool uses_avx512() {
  return isa_level() >= 2;
}

struct Packed::Lazy {
  struct Form {
    std::once_flag once;
    amx::Parts parts;
    bool made = false;
  };
  Form form[2];  // W on the right, W on the left
};

const amx::Parts* Packed::amx_parts(bool a_form) const {
  if (isa_level() < 3 || !lazy_) return nullptr;
  Lazy::Form& f = lazy_->form[a_form ? 1 : 0];
  std::call_once(f.once, [&] { f.made = amx::make_parts(data_.get(), n_, k_, a_form, &f.parts); });
  return f.made ? &f.parts : nullptr;
}

bool amx_takes_w_left(const Packed& W, int64_t N, ThreadPool* pool) {
  return isa_level() == 3 && amx_size_w_left(W.outputs(), N, W.depth(), pool) &&
         W.amx_parts(true) != nullptr;
}

namespace {
// C = epilogue(W X) on the tiles where they take it (X(k, n) at x[off[k] + n], or at
// x[k * ldx + n] without off); false where the FMA kernel is to run it.
bool amx_w_left(const Packed& W, const float* x, const int64_t* off, int64_t ldx, int64_t N,
                float* C, int64_t ldc, const Epilogue& ep, ThreadPool* pool) {
  if (!amx_takes_w_left(W, N, pool)) return false;
  return amx::gemm_w_left(*W.amx_parts(true), x, off, ldx, N, C, ldc, ep, pool);
}
}  // namespace

void Packed::Free::operator()(float* p) const {
  ::operator delete (p, std::align_val_t{align});
}

Packed Packed::zeros(int64_t n, int64_t K) {
  Packed p;
  p.n_ = n;
  p.k_ = K;
  const size_t size = static_cast<size_t>(std::max<int64_t>(ceil_div(n, kNR) * K * kNR, 1));
  const size_t bytes = size * sizeof(float);
  // From 4 MiB, in 2 MiB pages where the kernel allows them on request: a layer's weights
  // are read once a run, and at batch 1 (an MLP's 1024 x 1024 layers) the product runs at
  // the memory's rate, to which the page walks of 4 KiB pages added (0-3% of such a run).
  const bool huge = bytes >= (size_t{4} << 20);
  const size_t al = huge ? kHugePageBytes : static_cast<size_t>(kAlign);
  p.data_ = std::unique_ptr<float[], Free>(
      static_cast<float*>(::operator new (bytes, std::align_val_t{al})), Free{al});
  if (huge) advise_huge_pages(p.data_.get(), bytes);
  std::fill(p.data_.get(), p.data_.get() + size, 0.f);
  p.lazy_ = std::make_shared<Lazy>();
  return p;
}

Packed Packed::pack(const float* w, int64_t ld, int64_t n, int64_t K, bool k_major) {
  Packed p = zeros(n, K);
  for (int64_t j = 0; j < n; ++j) {
    float* d = p.data_.get() + (j / kNR) * K * kNR + j % kNR;
    for (int64_t k = 0; k < K; ++k) d[k * kNR] = k_major ? w[k * ld + j] : w[j * ld + k];
  }
  return p;
}

void Packed::scale_outputs(const float* s) {
  for (int64_t j = 0; j < n_; ++j) {
    float* d = data_.get() + (j / kNR) * k_ * kNR + j % kNR;
    for (int64_t k = 0; k < k_; ++k) d[k * kNR] *= s[j];
  }
}

void gemm_w_left(const Packed& W, const float* X, int64_t ldx, int64_t N, float* C, int64_t ldc,
                 const Epilogue& ep, ThreadPool* pool) {
  if (amx_w_left(W, X, nullptr, ldx, N, C, ldc, ep, pool)) return;
  const int64_t M = W.outputs(), K = W.depth();
  run(Problem{M, N, K, row_blocks(M, kNR), W.data(), true, 0, 0, X, kNR, ldx, C, ldc, &ep}, pool);
}

void gemm_w_left_offsets(const Packed& W, const float* x, const int64_t* off, int64_t N, float* C,
                         int64_t ldc, const Epilogue& ep, ThreadPool* pool) {
  if (amx_w_left(W, x, off, 0, N, C, ldc, ep, pool)) return;
  const int64_t M = W.outputs(), K = W.depth();
  run(Problem{M, N, K, row_blocks(M, kNR), W.data(), true, 0, 0, x, kNR, 0, C, ldc, &ep, off},
      pool);
}

void gemm_w_right(const float* a, int64_t a_rs, int64_t a_ks, int64_t M, const Packed& W, float* C,
                  int64_t ldc, const Epilogue& ep, ThreadPool* pool) {
  gemm_w_right(a, a_rs, a_ks, M, W, C, ldc, ep, pool, {});
}

void gemm_w_right(const float* a, int64_t a_rs, int64_t a_ks, int64_t M, const Packed& W, float* C,
                  int64_t ldc, const Epilogue& ep, ThreadPool* pool,
                  const std::function<void(int64_t, int64_t)>& cols_done) {
  const int64_t N = W.outputs(), K = W.depth();
  if (a_ks == 1 && !cols_done && isa_level() == 3 && amx_size(M, N, K, pool)) {
    const amx::Parts* parts = W.amx_parts(false);
    if (parts && amx::gemm_w_right(a, a_rs, M, *parts, C, ldc, ep, pool)) return;
  }
  Problem p{M,        N,       K,    row_blocks(M, std::max<int64_t>(M, 1)),
            a,        false,   a_rs, a_ks,
            W.data(), K * kNR, kNR,  C,
            ldc,      &ep};
  p.cols_done = cols_done ? &cols_done : nullptr;
  run(p, pool);
}

void gemm_w_right_k(const float* a, int64_t lda, int64_t M, const Packed& W, int64_t k0, int64_t k1,
                    float* C, int64_t ldc, const Epilogue& ep, bool accumulate, ThreadPool* pool) {
  gemm_w_right_k(a, lda, 1, M, W, k0, k1, C, ldc, ep, accumulate, pool);
}

void gemm_w_right_k(const float* a, int64_t a_rs, int64_t a_ks, int64_t M, const Packed& W,
                    int64_t k0, int64_t k1, float* C, int64_t ldc, const Epilogue& ep,
                    bool accumulate, ThreadPool* pool) {
  // Panel j's rows k0 .. k1 - 1: the panels keep W's full depth as their stride.
  const float* w = W.data() + k0 * kNR;
  const int64_t N = W.outputs(), K = k1 - k0, panel = W.depth() * kNR;
  Problem p{M, N,   K,  row_blocks(M, M), a + k0 * a_ks, false, a_rs, a_ks, w, panel, kNR,
            C, ldc, &ep};
  p.accumulate = accumulate;
  run(p, pool);
}

void gemm_plain(const float* a, int64_t a_rs, int64_t a_ks, int64_t M, const float* b, int64_t ldb,
                int64_t N, int64_t K, float* C, int64_t ldc, const Epilogue& ep, ThreadPool* pool) {
  run(Problem{M, N, K, row_blocks(M, std::max<int64_t>(M, 1)), a, false, a_rs, a_ks, b, kNR, ldb, C,
              ldc, &ep},
      pool);
}

void gemm_w_right_panels(const float* a, int64_t lda, int64_t M, const float* w, int64_t N,
                         int64_t K, float* C, int64_t ldc, const Epilogue& ep, bool accumulate) {
  gemm_w_right_panels(a, lda, 1, M, w, N, K, C, ldc, ep, accumulate);
}

void gemm_w_right_panels(const float* a, int64_t a_rs, int64_t a_ks, int64_t M, const float* w,
                         int64_t N, int64_t K, float* C, int64_t ldc, const Epilogue& ep,
                         bool accumulate) {
  Problem p{
      M, N,   K,  row_blocks(M, std::max<int64_t>(M, 1)), a, false, a_rs, a_ks, w, K * kNR, kNR,
      C, ldc, &ep};
  p.accumulate = accumulate;
  run(p, nullptr);
}

void ConstB::pack(const Tensor* b, bool trans_b) {
  // AVX-512 only: with the AVX2 kernel, gemm.h's packed B (gemm_packed_b) measured as fast
  // on Gemm's products (make bench's MLP at batch 64 on a Zen 1 CPU: 0.95-0.98 against
  // 0.96-0.99) and faster at one row (batch 1: 1.07 against 0.98-1.04).
  if (!b || b->rank() != 2 || b->numel() == 0 || b->dtype() != DataType::kFloat || !uses_avx512())
    return;
  // op(B) is K x N; W(j, k) = op(B)(k, j): B^T's rows are B's rows when trans_b.
  const int64_t N = trans_b ? b->dim(0) : b->dim(1);
  const int64_t K = trans_b ? b->dim(1) : b->dim(0);
  if (narrow_b(K, N)) return;  // gemm_packed_b's dot products (compute/gemm.h)
  w_ = Packed::pack(b->data<float>(), b->dim(1), N, K, !trans_b);
  b_shape_ = b->shape();
}

namespace {
// How C (broadcast to M x N) enters the epilogue.
enum class CForm { kNone, kScalar, kRow, kColumn, kFull };

CForm c_form(const Tensor* C, int64_t M, int64_t N) {
  if (!C) return CForm::kNone;
  const Shape& cs = C->shape();
  const int64_t cm = cs.size() == 2 ? cs[0] : 1;
  const int64_t cn = cs.empty() ? 1 : cs.back();
  const bool per_row = cm == M && M != 1, per_col = cn == N && N != 1;
  if (per_row && per_col) return CForm::kFull;
  if (per_row) return CForm::kRow;
  if (per_col) return CForm::kColumn;
  return CForm::kScalar;
}
}  // namespace

bool ConstB::accepts(const Tensor& B, const Tensor* C, float beta, int64_t M, int64_t N) const {
  if (w_.empty() || B.shape() != b_shape_) return false;
  if (!C || beta == 0.f) return true;
  return C->dtype() == DataType::kFloat && (c_form(C, M, N) != CForm::kFull || beta == 1.f);
}

void ConstB::run(const Tensor& A, bool trans_a, const Tensor* C, float alpha, float beta,
                 const ActSpec& act, float* y, ThreadPool* pool) const {
  const int64_t N = w_.outputs();
  const int64_t M = trans_a ? A.dim(1) : A.dim(0);
  Epilogue ep;
  ep.alpha = alpha;
  ep.act = act;
  std::vector<float> scaled;  // beta * C when beta is not 1, or a scalar C spread out
  const CForm form = beta == 0.f ? CForm::kNone : c_form(C, M, N);
  const float* c = form == CForm::kNone ? nullptr : C->data<float>();
  auto bias = [&](int64_t n) -> const float* {
    if (beta == 1.f && form != CForm::kScalar) return c;
    scaled.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) scaled[i] = beta * c[form == CForm::kScalar ? 0 : i];
    return scaled.data();
  };
  switch (form) {
    case CForm::kNone:
      break;
    case CForm::kScalar:
    case CForm::kColumn:
      ep.bias_col = bias(N);
      break;
    case CForm::kRow:
      ep.bias_row = bias(M);
      break;
    case CForm::kFull:
      ep.z = c;
      ep.ldz = N;
      break;
  }
  const int64_t lda = A.dim(1);
  gemm_w_right(A.data<float>(), trans_a ? 1 : lda, trans_a ? lda : 1, M, w_, y, N, ep, pool);
}

}  // namespace fgemm
}  // namespace nn
}  // namespace ortlite
