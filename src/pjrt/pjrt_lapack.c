// iron_register_lapack: the plugin's one export besides GetPjrtApi. The
// ironjax package calls it through ctypes (on the library path jax loaded,
// so dlopen returns the same handle) with scipy's LAPACK/BLAS function
// pointers; see iron_lapack_register in include/iron/iron.h.
#include "iron/iron.h"

// Returns 0 when `name` was registered, -1 when the host never uses it.
__attribute__((visibility("default"))) int iron_register_lapack(
    const char *name, void *fn);

int iron_register_lapack(const char *name, void *fn) {
  iron_status_t st = iron_lapack_register(name, fn);
  if (st) {
    iron_status_free(st);
    return -1;
  }
  return 0;
}
