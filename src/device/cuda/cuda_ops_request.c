// Kernel requests of the op kernels under content-derived names: the
// generators name their kernel generically ("iron_reduce"); here the name
// becomes "iron_reduce_<hash of the source>", so two different kernels of a
// plan never share an extern "C" name (whatever way the compiler batches
// sources), while identical kernels keep identical sources (the compile
// cache still hits across runs).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_ops_internal.h"

// Names live for the process: the compiler may keep the pointer it is
// given. One entry per distinct kernel text, so the set stays small.
typedef struct name_entry {
  struct name_entry *next;
  char name[];
} name_entry_t;
static name_entry_t *g_names;
static pthread_mutex_t g_names_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *intern(const char *s) {
  pthread_mutex_lock(&g_names_mu);
  const char *r = NULL;
  for (name_entry_t *e = g_names; e && !r; e = e->next)
    if (strcmp(e->name, s) == 0) r = e->name;
  if (!r) {
    size_t n = strlen(s) + 1;
    name_entry_t *e = malloc(sizeof(*e) + n);
    if (e) {
      memcpy(e->name, s, n);
      e->next = g_names;
      g_names = e;
      r = e->name;
    }
  }
  pthread_mutex_unlock(&g_names_mu);
  return r;
}

iron_status_t iron_cuda_ops_request(iron_cuda_device_t *dev, const char *src,
                                    const char *name,
                                    iron_cuda_function_t **out_fn) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a
  for (const unsigned char *c = (const unsigned char *)src; *c; ++c) {
    h ^= *c;
    h *= 1099511628211ull;
  }
  char pat[160], unique[160];
  snprintf(pat, sizeof(pat), " %s(", name);
  const char *at = strstr(src, pat);
  if (!at)
    return IRON_ERR(INTERNAL, "generated source has no kernel %s", name);
  int n = snprintf(unique, sizeof(unique), "%s_%016llx", name,
                   (unsigned long long)h);
  if (n < 0 || (size_t)n >= sizeof(unique))
    return IRON_ERR(INTERNAL, "kernel name too long: %s", name);
  size_t pre = (size_t)(at - src) + 1, old = strlen(name);
  size_t len = strlen(src) - old + (size_t)n + 1;
  char *text = malloc(len);
  if (!text) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  memcpy(text, src, pre);
  memcpy(text + pre, unique, (size_t)n);
  strcpy(text + pre + (size_t)n, src + pre + old);
  const char *kept = intern(unique);
  iron_status_t st =
      kept ? iron_cuda_function_request(dev, text, kept, out_fn)
           : IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  free(text);
  return st;
}

iron_status_t iron_cuda_ops_refused(const iron_ir_op_t *op,
                                    iron_status_t generator_error) {
  iron_status_t u = iron_ir_op_unimplemented(
      op, "on cuda: %s", iron_status_message(generator_error));
  iron_status_free(generator_error);
  return u;
}
