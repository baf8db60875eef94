// Include FIRST in every src/providers/cpu/math translation unit (before any other header).
//
// With GCC's default -ftrapping-math the vectorizer will not if-convert a `c ? a : b` on
// floats whose operands are computed (LeakyRelu, PRelu, Max with NaN, the selects inside
// fast_math.h). ortlite never uses floating point traps and the option changes no result
// (this is not fast-math: no reassociation), so these kernels are compiled without it.
// Placed before every include, the whole translation unit shares the same options, so
// inlining is unaffected. (The pragma cannot turn off -fmath-errno for sqrt: that one is in
// fast_kernels.cc.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
