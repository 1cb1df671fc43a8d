// LAPACK/BLAS routines lent to the host device at run time.
//
// The plugin links no LAPACK. Whoever loads it (the ironjax Python package,
// from scipy's bundled library; or a C program with its own) registers the
// Fortran entry points by name ("dpotrf", "ztrsm" ...) before compiling
// programs that need them; kernels look them up at prepare time and fail
// with an error naming a missing routine. 32-bit LAPACK integers (LP64).
//
// Thread-safety: register and lookup may be called from any thread; a
// registered pointer stays valid for the life of the process.
#ifndef IRON_DEVICE_HOST_LAPACK_H_
#define IRON_DEVICE_HOST_LAPACK_H_

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Registers `fn` as the routine `name` (lower case, with its s/d/c/z
// prefix). INVALID_ARGUMENT for a name the host kernels never use.
iron_status_t iron_host_lapack_register(const char *name, void *fn);

// The routine registered as `name`, or NULL.
void *iron_host_lapack_lookup(const char *name);

// UNIMPLEMENTED naming the routine when it is not registered; else sets *out_fn.
iron_status_t iron_host_lapack_require(const char *name, void **out_fn);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_HOST_LAPACK_H_
