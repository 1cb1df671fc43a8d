// Complete translation units from generated kernel bodies: prelude, body,
// a kernel name derived from the text.
#ifndef IRON_DEVICE_CUDA_GEN_SOURCE_H_
#define IRON_DEVICE_CUDA_GEN_SOURCE_H_

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "device/cuda/gen/text.h"

#ifdef __cplusplus
extern "C" {
#endif

// Generators write the kernel's name as this placeholder;
// iron_cuda_source_make replaces it with "<prefix>_<hash of the body>", so
// that distinct kernels have distinct names (many can share one program).
#define IRON_CUDA_KERNEL_PLACEHOLDER "IRON_KERNEL_NAME"

// Finishes `body` (consumed, also on error) into a complete translation unit
// (prelude + body with the placeholder replaced) and the kernel name; both
// malloc'ed.
iron_status_t iron_cuda_source_make(iron_cuda_text_t *body, const char *prefix,
                                    char **out_source, char **out_name);

// A stable 128-bit fingerprint of bytes (cache keys, kernel names).
void iron_cuda_hash128(const void *data, size_t n, uint64_t seed,
                       uint64_t out[2]);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_GEN_SOURCE_H_
