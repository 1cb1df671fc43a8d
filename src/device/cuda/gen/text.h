// The text buffer every CUDA C generator writes into (src/device/cuda/gen/).
#ifndef IRON_DEVICE_CUDA_GEN_TEXT_H_
#define IRON_DEVICE_CUDA_GEN_TEXT_H_

#include <stdbool.h>
#include <stddef.h>

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// A growable text buffer. Appending never fails; an allocation failure is
// remembered and reported by iron_cuda_text_finish. Zero-initialised (or
// iron_cuda_text_init) is empty. Not thread-safe; owned by one generator.
typedef struct iron_cuda_text {
  char *text;  // NUL-terminated once anything was appended; may be NULL
  size_t len, cap;
  bool oom;
} iron_cuda_text_t;

void iron_cuda_text_init(iron_cuda_text_t *t);
void iron_cuda_text_printf(iron_cuda_text_t *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
// Whether the text holds `needle` (helpers appended once per source).
bool iron_cuda_text_contains(const iron_cuda_text_t *t, const char *needle);
// On success *out_text is the malloc'ed text ("" when nothing was appended)
// and the buffer is reset; on failure the buffer is freed.
iron_status_t iron_cuda_text_finish(iron_cuda_text_t *t, char **out_text);
void iron_cuda_text_free(iron_cuda_text_t *t);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_GEN_TEXT_H_
