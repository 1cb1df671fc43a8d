#include "device/host/lapack.h"

#include <stdatomic.h>
#include <string.h>

// Every routine a host kernel may call; keep in sync with
// python/ironjax/linalg.py (routine_names).
static const char *const kNames[] = {
#define IRON_LAPACK_ALL_(r, c) "s" r, "d" r, "c" c, "z" c
    IRON_LAPACK_ALL_("potrf", "potrf"), IRON_LAPACK_ALL_("getrf", "getrf"),
    IRON_LAPACK_ALL_("geqrf", "geqrf"), IRON_LAPACK_ALL_("geqp3", "geqp3"),
    IRON_LAPACK_ALL_("orgqr", "ungqr"), IRON_LAPACK_ALL_("ormqr", "unmqr"),
    IRON_LAPACK_ALL_("syevd", "heevd"), IRON_LAPACK_ALL_("gesdd", "gesdd"),
    IRON_LAPACK_ALL_("gesvd", "gesvd"), IRON_LAPACK_ALL_("geev", "geev"),
    IRON_LAPACK_ALL_("gees", "gees"),   IRON_LAPACK_ALL_("gehrd", "gehrd"),
    IRON_LAPACK_ALL_("sytrd", "hetrd"), IRON_LAPACK_ALL_("gtsv", "gtsv"),
    IRON_LAPACK_ALL_("trsm", "trsm"),
#undef IRON_LAPACK_ALL_
};
#define NUM_NAMES (sizeof(kNames) / sizeof(kNames[0]))

static _Atomic(void *) g_fns[NUM_NAMES];

static int find(const char *name) {
  if (!name) return -1;
  for (size_t i = 0; i < NUM_NAMES; ++i)
    if (strcmp(kNames[i], name) == 0) return (int)i;
  return -1;
}

iron_status_t iron_host_lapack_register(const char *name, void *fn) {
  int i = find(name);
  if (i < 0)
    return IRON_ERR(INVALID_ARGUMENT, "LAPACK routine \"%s\" is not used by "
                    "the host device", name ? name : "(null)");
  atomic_store(&g_fns[i], fn);
  return IRON_OK;
}

void *iron_host_lapack_lookup(const char *name) {
  int i = find(name);
  return i < 0 ? NULL : atomic_load(&g_fns[i]);
}

iron_status_t iron_host_lapack_require(const char *name, void **out_fn) {
  void *fn = iron_host_lapack_lookup(name);
  if (!fn)
    // UNIMPLEMENTED: like an unsupported op, the program cannot run in
    // this process (a C program without LAPACK, or an old ironjax).
    return IRON_ERR(UNIMPLEMENTED,
                    "LAPACK routine %s is not registered with the plugin "
                    "(the ironjax package registers scipy's LAPACK through "
                    "iron_register_lapack when jax initializes the plugin)",
                    name);
  *out_fn = fn;
  return IRON_OK;
}
