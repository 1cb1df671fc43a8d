// Translation units from generated kernel bodies (source.h).
#include "device/cuda/gen/source.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/gen/prelude.h"

// FNV-1a over the bytes, two lanes with different offsets, finished with a
// 64-bit mix: a stable 128-bit fingerprint (not cryptographic; the cache
// files are ours).
static uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

void iron_cuda_hash128(const void *data, size_t n, uint64_t seed,
                       uint64_t out[2]) {
  const unsigned char *p = data;
  uint64_t a = 0xcbf29ce484222325ULL ^ seed;
  uint64_t b = 0x84222325cbf29ce4ULL ^ mix64(seed + 1);
  for (size_t i = 0; i < n; ++i) {
    a = (a ^ p[i]) * 0x100000001b3ULL;
    b = (b ^ p[i]) * 0x100000001b3ULL;
    b ^= b >> 29;
  }
  out[0] = mix64(a ^ (uint64_t)n);
  out[1] = mix64(b ^ mix64(a));
}

iron_status_t iron_cuda_source_make(iron_cuda_text_t *body, const char *prefix,
                                    char **out_source, char **out_name) {
  char *text = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_text_finish(body, &text));
  uint64_t h[2];
  iron_cuda_hash128(text, strlen(text), 0, h);
  char name[96];
  snprintf(name, sizeof(name), "%s_%016llx", prefix, (unsigned long long)h[0]);
  iron_cuda_text_t out;
  iron_cuda_text_init(&out);
  iron_cuda_text_printf(&out, "%s", iron_cuda_prelude());
  // Replace every IRON_KERNEL_NAME placeholder with the name.
  const char *tok = IRON_CUDA_KERNEL_PLACEHOLDER;
  size_t tl = strlen(tok);
  const char *p = text;
  for (;;) {
    const char *q = strstr(p, tok);
    if (!q) {
      iron_cuda_text_printf(&out, "%s", p);
      break;
    }
    iron_cuda_text_printf(&out, "%.*s%s", (int)(q - p), p, name);
    p = q + tl;
  }
  free(text);
  char *src = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_text_finish(&out, &src));
  char *nm = strdup(name);
  if (!nm) {
    free(src);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  *out_source = src;
  *out_name = nm;
  return IRON_OK;
}
