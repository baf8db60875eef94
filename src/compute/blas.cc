#include "compute/blas.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#ifdef ORTLITE_HAVE_BLAS
#include <cblas.h>
#include <dlfcn.h>

#include <vector>
#include <string>
#endif

namespace ortlite::blas {

#ifdef ORTLITE_HAVE_BLAS

namespace {

// Below this many multiply-adds the call overhead and per-call packing of the BLAS cost
// more than ortlite's own kernels (measured with tools/bench.py; docs/performance.md).
constexpr double kMinWork = 48.0 * 48.0 * 48.0;
// Each parallel block gets at least this much work.
constexpr double kMinWorkPerBlock = 128.0 * 128.0 * 64.0;

bool env_enabled() {
  const char* env = std::getenv("ORTLITE_GEMM");
  return !(env && std::strcmp(env, "own") == 0);
}

// The library's entry points, resolved when the first product large enough for it comes.
struct Api {
  decltype(&scipy_cblas_sgemm) sgemm = nullptr;
  decltype(&scipy_cblas_dgemm) dgemm = nullptr;
  decltype(&scipy_openblas_set_num_threads) set_num_threads = nullptr;
  decltype(&scipy_openblas_get_config) get_config = nullptr;
};

void* open_library() {
  // Next to ortlite/ in the same site-packages (an installed ortlite), else the copy the
  // extension was built against (an in-place build): the places the rpath used to name.
  std::vector<std::string> candidates;
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&open_library), &self) && self.dli_fname) {
    std::string dir = self.dli_fname;
    dir = dir.substr(0, dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/'));
    const size_t up = dir.find_last_of('/');
    if (up != std::string::npos)
      candidates.push_back(dir.substr(0, up) + "/scipy_openblas32/lib/" ORTLITE_BLAS_LIB);
  }
  candidates.push_back(ORTLITE_BLAS_DIR "/" ORTLITE_BLAS_LIB);
  // OpenBLAS starts its worker threads when it loads unless OPENBLAS_NUM_THREADS says
  // otherwise; ortlite splits products over its own pool, so it loads with the variable set
  // to 1, then restores the caller's environment.
  const char* prev = std::getenv("OPENBLAS_NUM_THREADS");
  const std::string saved = prev ? prev : "";
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  void* h = nullptr;
  for (const std::string& c : candidates) {
    h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h) break;
  }
  if (prev) {
    setenv("OPENBLAS_NUM_THREADS", saved.c_str(), 1);
  } else {
    unsetenv("OPENBLAS_NUM_THREADS");
  }
  return h;
}

const Api& api() {
  static const Api a = [] {
    Api r;
    if (!env_enabled()) return r;
    void* h = open_library();
    if (!h) return r;
    r.sgemm = reinterpret_cast<decltype(r.sgemm)>(dlsym(h, "scipy_cblas_sgemm"));
    r.dgemm = reinterpret_cast<decltype(r.dgemm)>(dlsym(h, "scipy_cblas_dgemm"));
    r.set_num_threads =
        reinterpret_cast<decltype(r.set_num_threads)>(dlsym(h, "scipy_openblas_set_num_threads"));
    r.get_config = reinterpret_cast<decltype(r.get_config)>(dlsym(h, "scipy_openblas_get_config"));
    if (!r.sgemm || !r.dgemm || !r.set_num_threads || !r.get_config) return Api{};
    // OpenBLAS's own threads stay idle: ortlite's pool does the splitting. (The library is
    // the scipy-openblas32 wheel's, which numpy does not use; the wheel's library has no
    // per-thread setting, so this is process-wide for that library.)
    r.set_num_threads(1);
    return r;
  }();
  return a;
}

bool fits_int(int64_t v) {
  return v >= 0 && v <= INT_MAX;
}

template <typename T, typename Call>
bool run(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const T* A, int64_t lda,
         const T* B, int64_t ldb, T* C, int64_t ldc, ThreadPool* pool, const Call& call) {
  if (M <= 0 || N <= 0 || K <= 0) return false;
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  if (work < kMinWork || !enabled()) return false;
  for (int64_t v : {M, N, K, lda, ldb, ldc})
    if (!fits_int(v)) return false;
  const int64_t threads = pool ? pool->num_threads() : 1;
  const int64_t max_blocks = static_cast<int64_t>(work / kMinWorkPerBlock);
  const int64_t blocks = std::max<int64_t>(1, std::min(threads, max_blocks));
  if (blocks == 1) {
    call(transA, transB, M, N, K, A, lda, B, ldb, C, ldc);
    return true;
  }
  // Split the larger of M and N into blocks of whole 16-wide panels.
  const bool by_cols = N >= M;
  const int64_t extent = by_cols ? N : M;
  int64_t step = (extent + blocks - 1) / blocks;
  step = std::min(extent, (step + 15) / 16 * 16);
  const int64_t n_blocks = (extent + step - 1) / step;
  pool->parallel_for(n_blocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t s = b * step, len = std::min(step, extent - s);
      if (by_cols) {
        const T* Bb = transB ? B + s * ldb : B + s;
        call(transA, transB, M, len, K, A, lda, Bb, ldb, C + s, ldc);
      } else {
        const T* Ab = transA ? A + s : A + s * lda;
        call(transA, transB, len, N, K, Ab, lda, B, ldb, C + s * ldc, ldc);
      }
    }
  });
  return true;
}

CBLAS_TRANSPOSE tr(bool t) {
  return t ? CblasTrans : CblasNoTrans;
}

}  // namespace

bool enabled() {
  return api().sgemm != nullptr;
}

const char* description() {
  static const char* d = enabled() ? api().get_config() : "none";
  return d;
}

bool gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
          int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc,
          ThreadPool* pool) {
  if (M == 1) return false;  // one row: ortlite's gemv (threaded, no per-call packing) wins
  return run<float>(transA, transB, M, N, K, A, lda, B, ldb, C, ldc, pool,
                    [&](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a,
                        int64_t la, const float* b, int64_t lb, float* c, int64_t lc) {
                      api().sgemm(CblasRowMajor, tr(ta), tr(tb), static_cast<int>(m),
                                  static_cast<int>(n), static_cast<int>(k), alpha, a,
                                  static_cast<int>(la), b, static_cast<int>(lb), beta, c,
                                  static_cast<int>(lc));
                    });
}

bool gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, double alpha, const double* A,
          int64_t lda, const double* B, int64_t ldb, double beta, double* C, int64_t ldc,
          ThreadPool* pool) {
  if (M == 1) return false;
  return run<double>(transA, transB, M, N, K, A, lda, B, ldb, C, ldc, pool,
                     [&](bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double* a,
                         int64_t la, const double* b, int64_t lb, double* c, int64_t lc) {
                       api().dgemm(CblasRowMajor, tr(ta), tr(tb), static_cast<int>(m),
                                   static_cast<int>(n), static_cast<int>(k), alpha, a,
                                   static_cast<int>(la), b, static_cast<int>(lb), beta, c,
                                   static_cast<int>(lc));
                     });
}

#else  // no BLAS compiled in

bool enabled() {
  return false;
}
const char* description() {
  return "none";
}
bool gemm(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
          int64_t, float, float*, int64_t, ThreadPool*) {
  return false;
}
bool gemm(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
          int64_t, double, double*, int64_t, ThreadPool*) {
  return false;
}

#endif

}  // namespace ortlite::blas
