// stablehlo.convolution on the CUDA device: the geometry (planned from the
// op with the host's checks, device/plans/conv_plan.h) and the generator of a
// shape-specialized direct convolution kernel. GPU-free, so CI compiles
// every variant with NVRTC (tests/c/test_cuda_conv_codegen.c) and runs the
// generated text on the CPU through a C++ shim against the host kernel.
#ifndef IRON_DEVICE_CUDA_GEN_CONV_H_
#define IRON_DEVICE_CUDA_GEN_CONV_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IRON_CUDA_CONV_MAX_SP (IRON_MAX_RANK - 2)

typedef struct iron_cuda_conv {
  iron_dtype_t lhs_dtype, rhs_dtype, out_dtype;
  // Accumulation dtype (the host's): f32 for f16/bf16/f32 results, f64,
  // c64, c128, and s64 (wrapping, as u64) for integer and pred results.
  iron_dtype_t comp_dtype;
  int32_t rank, nsp;
  int64_t out_dims[IRON_MAX_RANK];
  int32_t out_batch_dim, out_feature_dim;
  int32_t out_sp_dim[IRON_CUDA_CONV_MAX_SP];  // result dim of spatial d
  bool batch_groups;     // groups split the lhs batch (else its features)
  int64_t groups;        // feature_group_count * batch_group_count
  int64_t n_out;         // result batch
  int64_t c_in_g;        // kernel input features (per group)
  int64_t c_out_g;       // output features per group
  int64_t in_bs, in_fs;  // lhs strides (elements) of batch / feature
  int64_t k_is, k_os;    // rhs strides of input / output feature
  int64_t in_sp[IRON_CUDA_CONV_MAX_SP], in_ss[IRON_CUDA_CONV_MAX_SP];
  int64_t k_sp[IRON_CUDA_CONV_MAX_SP], k_ss[IRON_CUDA_CONV_MAX_SP];
  int64_t stride[IRON_CUDA_CONV_MAX_SP], pad_lo[IRON_CUDA_CONV_MAX_SP];
  int64_t lhs_dil[IRON_CUDA_CONV_MAX_SP], rhs_dil[IRON_CUDA_CONV_MAX_SP];
  bool reversed[IRON_CUDA_CONV_MAX_SP];
  int64_t out_count;
  // The direct kernel computes indices in 64 bits (else 32: every element
  // count and window offset is at most 2^30).
  bool wide_index;
} iron_cuda_conv_t;

// Validates a stablehlo.convolution with the host's checks
// (device/plans/conv_plan.h: same statuses and messages) and fills *out. Also
// refuses what the CUDA generators cannot hold (sub-byte integers, f8/f4
// operands of a complex result).
iron_status_t iron_cuda_conv_plan(const iron_ir_op_t *op,
                                  iron_cuda_conv_t *out);

// Direct convolution: one thread per result element (row-major over the
// result's dims), loops over the kernel positions (row-major, padding and
// lhs-dilation holes skipped) and the input features of its group,
// accumulating in comp_dtype in the host's order (conv.c's direct loops).
// Kernel `name(const L *lhs, const R *rhs, O *out)`, 1-D grid of 256-thread
// blocks (*out_grid), grid-stride loop.
iron_status_t iron_cuda_gen_conv(const char *name, const iron_cuda_conv_t *c,
                                 char **out_src, unsigned *out_grid);

// --- im2col + GEMM -------------------------------------------------------
// For each group g, the result is C_g[M, N] = P_g[M, K] x W_g[K, N] with
// M = n_out x output positions (row-major: batch, then spatial dims),
// N = c_out_g and K = kernel positions x c_in_g (position-major, the
// direct loops' order). P (patches, [G, M, K]) and W ([G, K, N]) are built
// by the kernels below in the operand dtypes (no conversion); C is dense
// [G, M, N] and scattered into the result's layout by the unpack kernel.
// Each kernel has a 1-D grid of 256-thread blocks (*out_grid) and a
// grid-stride loop.

// Sizes of the GEMM view.
void iron_cuda_conv_gemm_dims(const iron_cuda_conv_t *c, int64_t *out_m,
                              int64_t *out_n, int64_t *out_k);

// Kernel `name(const L *lhs, L *patches, int64_t row0, int64_t rows)`:
// patches [G, rows, K] of rows [row0, row0 + rows), zeros for padding and
// holes. *out_grid covers all M rows (the loop is grid-stride).
iron_status_t iron_cuda_gen_conv_im2col(const char *name,
                                        const iron_cuda_conv_t *c,
                                        char **out_src, unsigned *out_grid);
// Kernel `name(const R *rhs, R *w)`.
iron_status_t iron_cuda_gen_conv_wpack(const char *name,
                                       const iron_cuda_conv_t *c,
                                       char **out_src, unsigned *out_grid);
// Kernel `name(const O *gemm, O *out)`: the dense [G, M, N] product (in the
// result dtype) into the result's layout.
iron_status_t iron_cuda_gen_conv_unpack(const char *name,
                                        const iron_cuda_conv_t *c,
                                        char **out_src, unsigned *out_grid);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_GEN_CONV_H_
