/* Counts heap allocations (malloc, calloc, realloc, and the aligned forms) between
 * alloc_count_start() and alloc_count_stop(); loaded with LD_PRELOAD by tests/ownership/test_arena.py.
 * Frees are not intercepted: glibc's free takes every block these return. */
#include <stddef.h>
#include <errno.h>
extern void* __libc_malloc(size_t);
extern void* __libc_calloc(size_t, size_t);
extern void* __libc_realloc(void*, size_t);
extern void* __libc_memalign(size_t, size_t);
static long counter;
static int on;
static inline void bump(void) { if (__atomic_load_n(&on, __ATOMIC_RELAXED)) __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED); }
void* malloc(size_t n) { bump(); return __libc_malloc(n); }
void* calloc(size_t a, size_t b) { bump(); return __libc_calloc(a, b); }
void* realloc(void* p, size_t n) { bump(); return __libc_realloc(p, n); }
void* memalign(size_t a, size_t n) { bump(); return __libc_memalign(a, n); }
void* aligned_alloc(size_t a, size_t n) { bump(); return __libc_memalign(a, n); }
int posix_memalign(void** out, size_t a, size_t n) { bump(); void* p = __libc_memalign(a, n); if (!p) return ENOMEM; *out = p; return 0; }
void alloc_count_start(void) { __atomic_store_n(&counter, 0, __ATOMIC_RELAXED); __atomic_store_n(&on, 1, __ATOMIC_RELAXED); }
long alloc_count_stop(void) { __atomic_store_n(&on, 0, __ATOMIC_RELAXED); return __atomic_load_n(&counter, __ATOMIC_RELAXED); }
