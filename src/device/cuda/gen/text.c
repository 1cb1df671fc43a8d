// The generators' text buffer (text.h).
#include "device/cuda/gen/text.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void iron_cuda_text_init(iron_cuda_text_t *t) { memset(t, 0, sizeof(*t)); }

void iron_cuda_text_printf(iron_cuda_text_t *t, const char *fmt, ...) {
  if (t->oom) return;
  for (;;) {
    size_t room = t->cap - t->len;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->text ? t->text + t->len : NULL, t->text ? room : 0,
                      fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->oom = true;
      return;
    }
    if (t->text && (size_t)n < room) {
      t->len += (size_t)n;
      return;
    }
    size_t need = t->len + (size_t)n + 1;
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < need) {
      if (cap > SIZE_MAX / 2) {
        t->oom = true;
        return;
      }
      cap *= 2;
    }
    char *s = realloc(t->text, cap);
    if (!s) {
      t->oom = true;
      return;
    }
    t->text = s;
    t->cap = cap;
  }
}

bool iron_cuda_text_contains(const iron_cuda_text_t *t, const char *needle) {
  return t->text && t->len && strstr(t->text, needle) != NULL;
}

iron_status_t iron_cuda_text_finish(iron_cuda_text_t *t, char **out_text) {
  if (t->oom) {
    iron_cuda_text_free(t);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory generating CUDA C");
  }
  if (!t->text) {
    t->text = calloc(1, 1);
    if (!t->text)
      return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory generating CUDA C");
  }
  *out_text = t->text;
  iron_cuda_text_init(t);
  return IRON_OK;
}

void iron_cuda_text_free(iron_cuda_text_t *t) {
  free(t->text);
  iron_cuda_text_init(t);
}
