// Compile-time memory accounting; see compile_memory.h.
#include "base/compile_memory.h"

#include <stdlib.h>

static _Thread_local int tls_depth = 0;
static _Thread_local int64_t tls_used = 0, tls_limit = 0;

static int64_t read_limit(void) {
  const char *e = getenv("IRON_COMPILE_MEMORY_LIMIT");
  if (!e || !e[0]) return IRON_COMPILE_MEMORY_DEFAULT_LIMIT;
  char *end = NULL;
  long long v = strtoll(e, &end, 10);
  // Bytes as a plain decimal number; anything else keeps the default.
  if (end == e || *end != '\0' || v < 0)
    return IRON_COMPILE_MEMORY_DEFAULT_LIMIT;
  return (int64_t)v;
}

void iron_compile_memory_begin(void) {
  if (tls_depth++ == 0) {
    tls_used = 0;
    tls_limit = read_limit();
  }
}

void iron_compile_memory_end(void) {
  if (tls_depth > 0 && --tls_depth == 0) tls_used = 0;
}

iron_status_t iron_compile_memory_reserve(uint64_t bytes, const char *what) {
  if (tls_depth == 0) return IRON_OK;
  if (tls_limit > 0 &&
      (bytes > (uint64_t)tls_limit || tls_used > tls_limit - (int64_t)bytes))
    return IRON_ERR(RESOURCE_EXHAUSTED,
                    "compile memory limit exceeded: %s needs %llu bytes, %lld "
                    "of IRON_COMPILE_MEMORY_LIMIT=%lld are in use",
                    what, (unsigned long long)bytes, (long long)tls_used,
                    (long long)tls_limit);
  if (bytes > (uint64_t)INT64_MAX - (uint64_t)tls_used)
    tls_used = INT64_MAX;
  else
    tls_used += (int64_t)bytes;
  return IRON_OK;
}

int64_t iron_compile_memory_used(void) { return tls_depth ? tls_used : 0; }
