// What the host gather and scatter kernels (gather.c, scatter_kernel.c)
// share at run time besides their plan (src/device/plans/gather_plan.h):
// copying a window run element by element.
#ifndef IRON_DEVICE_HOST_GATHER_COPY_H_
#define IRON_DEVICE_HOST_GATHER_COPY_H_

#include <stdint.h>
#include <string.h>

#include "device/host/host_kernel.h"
#include "device/plans/gather_plan.h"

extern const iron_kernel_t iron_host_scatter_kernel;

// Copies a window element by element size (1, 2, 4, 8, 16 bytes or any).
static inline void iron_gather_copy_strided(char *dst, int64_t ds,
                                            const char *src, int64_t ss,
                                            int64_t n, size_t es) {
  if (ds == 1 && ss == 1) {
    memcpy(dst, src, (size_t)n * es);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    memcpy(dst + (size_t)(i * ds) * es, src + (size_t)(i * ss) * es, es);
}

#endif  // IRON_DEVICE_HOST_GATHER_COPY_H_
