// Batched matrix products on strided views for the host dot kernel:
// C[b] = A[b] (M x K) * B[b] (K x N), C contiguous [batch, M, N].
// f32/f64 use a cache-blocked, register-blocked, multithreaded kernel (an
// AVX2+FMA variant is picked at run time on x86-64 CPUs that have it);
// c64/c128/s64 use straightforward loops.
#ifndef IRON_DEVICE_HOST_DOT_GEMM_H_
#define IRON_DEVICE_HOST_DOT_GEMM_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threadpool.h"

// Element (b, i, j) of a view lives at data[b*bs + i*rs + j*cs] (elements).
typedef struct iron_host_gemm_view {
  const void *data;
  int64_t bs, rs, cs;
} iron_host_gemm_view_t;

typedef enum iron_host_gemm_type {
  IRON_HOST_GEMM_F32,
  IRON_HOST_GEMM_F64,
  IRON_HOST_GEMM_C64,
  IRON_HOST_GEMM_C128,
  IRON_HOST_GEMM_S64,  // wrapping integer arithmetic
} iron_host_gemm_type_t;

// `fast` false forces the straightforward loops (IRON_HOST_DOT_FAST=0).
// Fails only when scratch memory cannot be allocated.
iron_status_t iron_host_gemm(iron_threadpool_t *pool,
                             iron_host_gemm_type_t type, bool fast,
                             int64_t batch, int64_t m, int64_t n, int64_t k,
                             const iron_host_gemm_view_t *a,
                             const iron_host_gemm_view_t *b, void *c);

#endif  // IRON_DEVICE_HOST_DOT_GEMM_H_
