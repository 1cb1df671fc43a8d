// stablehlo.convolution as a cuDNN call: which of cuDNN's three
// convolution calls computes it, with which descriptors (dims and strides
// of every tensor, padding, strides, dilations, mode, groups), and which
// copies around the call bring operands into a form cuDNN takes or the
// call's output into the result. Pure functions of the op's validated
// attributes (device/plans/conv_plan.h): no GPU, no cuDNN; tests check every
// convolution of the corpus and of the conformance suite against it
// (tests/c/test_cuda_cudnn.c, which also runs the plan on the CPU with
// cuDNN's documented semantics).
//
// Semantics used (1-D, per spatial dim; cuDNN's are those of its
// documentation; stablehlo's are the host's, device/host/conv.c):
//   cuDNN forward (CROSS_CORRELATION):
//     y[o] = sum_k x[o*s - p + k*d] * w[k]   (CONVOLUTION: w[K-1-k])
//     with symmetric zero padding p and O = (I + 2p - ((K-1)d+1)) / s + 1;
//   backward data: dx = the adjoint of forward in x (a transposed conv);
//   backward filter: dw = the adjoint of forward in w.
//   stablehlo: out[o] = sum_k lhs~[o*stride + k*rhs_dil - pad_lo] * rhs[k]
//     where lhs~ is lhs dilated by lhs_dilation.
// Mapping:
//   - lhs_dilation 1, batch_group_count 1: FORWARD (x = lhs, w = rhs,
//     y = result), or BACKWARD_FILTER when the lhs "batch" dim lies inside
//     its "feature" dim in memory (jax's weight gradient, whose roles are
//     swapped back: x = lhs with N <- its feature dim and C <- its batch
//     dim, dy = rhs, dw = result, cuDNN stride = rhs_dilation, cuDNN
//     dilation = window stride, p = pad_lo);
//   - batch_group_count > 1: BACKWARD_FILTER (the groups are cuDNN's);
//   - lhs_dilation > 1 (jax's input gradient of a strided convolution):
//     BACKWARD_DATA with dy = lhs, dx = result, cuDNN stride =
//     lhs_dilation, p = (K-1)*rhs_dil - pad_lo and mode CONVOLUTION (the
//     kernel as given is the reversed one of the forward pass);
//     window strides must be 1.
// cuDNN takes only symmetric, non-negative padding: negative padding
// crops the operand (offset and smaller dims, no copy); padding that
// symmetric padding cannot express is staged: FORWARD/BACKWARD_FILTER
// copy the input into a zero-filled buffer with the padding explicit,
// BACKWARD_DATA computes into a larger buffer and copies the part the
// result needs, or zero-fills result rows no contribution reaches (and,
// where cuDNN's padding would not let its output end there, appends zero
// rows to a copy of dy).
// A reversed window is cuDNN's CONVOLUTION mode for forward (and
// CROSS_CORRELATION for backward data); backward filter reads a reversed
// copy of dy. Windows reversed in some dims only are refused.
// Filters must be dense KCRS or KRSC: other kernel layouts (HWIO) are
// copied into the format that matches the input's layout (KRSC when its
// feature dim is innermost), and a filter result is computed dense and
// copied into the result's layout.
#ifndef IRON_DEVICE_CUDA_CUDA_CUDNN_PLAN_H_
#define IRON_DEVICE_CUDA_CUDA_CUDNN_PLAN_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/status.h"
#include "device/plans/conv_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IRON_CUDNN_MAX_SP 3                        // cuDNN: 2-D and 3-D
#define IRON_CUDNN_MAX_ND (IRON_CUDNN_MAX_SP + 2)  // N, C, spatial
// A staged grouped filter splits K into (group, feature): one dim more.
#define IRON_CUDNN_COPY_MAX_ND (IRON_CUDNN_MAX_ND + 1)
#define IRON_CUDNN_MAX_STAGE 3
#define IRON_CUDNN_MAX_PRE 2

typedef enum iron_cudnn_call {
  IRON_CUDNN_CALL_FORWARD = 0,
  IRON_CUDNN_CALL_BACKWARD_DATA = 1,
  IRON_CUDNN_CALL_BACKWARD_FILTER = 2,
} iron_cudnn_call_t;

// "forward", "backward_data", "backward_filter".
const char *iron_cudnn_call_name(iron_cudnn_call_t call);

// The buffers a plan refers to: the op's operands and result, and
// staging buffers (IRON_CUDNN_BUF_STAGE + k).
enum {
  IRON_CUDNN_BUF_LHS = 0,
  IRON_CUDNN_BUF_RHS = 1,
  IRON_CUDNN_BUF_OUT = 2,
  IRON_CUDNN_BUF_STAGE = 3,
};

// A tensor as the call sees it: dims[0] N (K for a filter), dims[1] C (C
// per group for a filter), then the spatial dims; strides and offset in
// elements of buffer `buf`. A filter's strides are those of its dense
// format (cuDNN's filter descriptors have no strides).
typedef struct iron_cudnn_tensor {
  int32_t buf;
  int64_t offset;
  int64_t dims[IRON_CUDNN_MAX_ND];
  int64_t strides[IRON_CUDNN_MAX_ND];
} iron_cudnn_tensor_t;

// A strided box copy between buffers: for every index of `dims`,
// dst[dst_offset + sum i*dst_strides] = src[src_offset + sum i*src_strides]
// (elements of the plan's dtype).
typedef struct iron_cudnn_copy {
  int32_t src_buf, dst_buf;
  int32_t nd;
  int64_t dims[IRON_CUDNN_COPY_MAX_ND];
  int64_t src_offset, src_strides[IRON_CUDNN_COPY_MAX_ND];
  int64_t dst_offset, dst_strides[IRON_CUDNN_COPY_MAX_ND];
} iron_cudnn_copy_t;

typedef struct iron_cudnn_plan {
  iron_cudnn_call_t call;
  iron_dtype_t dtype;       // lhs, rhs and result (one dtype)
  int data_type;            // IRON_CUDNN_DATA_* of dtype
  int compute_type;         // FLOAT for f16/bf16/f32, DOUBLE for f64
  bool tf32;                // f32 that may use TF32 tensor cores
  int32_t nsp;              // cuDNN spatial dims (2 or 3; 0-D/1-D get units)
  int64_t pad[IRON_CUDNN_MAX_SP], stride[IRON_CUDNN_MAX_SP],
      dilation[IRON_CUDNN_MAX_SP];
  int mode;                 // IRON_CUDNN_CONVOLUTION / _CROSS_CORRELATION
  int64_t groups;
  int filter_format;        // IRON_CUDNN_TENSOR_NCHW (KCRS) / _NHWC (KRSC)
  // By cuDNN role: x (dx for BACKWARD_DATA), w (dw for BACKWARD_FILTER),
  // y (dy for both backward calls). The call's output is x, w or y.
  iron_cudnn_tensor_t x, w, y;
  // Staging buffers (elements), zero-filled first where stage_zero.
  int32_t num_stage;
  int64_t stage_elems[IRON_CUDNN_MAX_STAGE];
  bool stage_zero[IRON_CUDNN_MAX_STAGE];
  // Copies into staging buffers before the call, and from the call's
  // output into the result after it.
  int32_t num_pre, num_post;
  iron_cudnn_copy_t pre[IRON_CUDNN_MAX_PRE], post[1];
  // The result is zero-filled before the call: it has elements that the
  // call (or the post copy) does not write and that no product reaches.
  bool out_zero;
  // x is a sub-view of its operand or result (cropped by negative
  // padding, or the part of the result a backward-data dx covers): strides
  // of a larger tensor, which cuDNN may refuse (then
  // iron_cudnn_plan_make_packed stages it).
  bool cropped;
  // Which stablehlo operand each role reads (for diagnostics/tests):
  // cudnn's x/w/y -> IRON_CUDNN_BUF_LHS/RHS/OUT before staging.
  int32_t x_src, w_src, y_src;
} iron_cudnn_plan_t;

// The calls that can express a validated convolution, most preferred
// first (at most 2); 0 when none can (the caller keeps its kernels).
int iron_cudnn_plan_calls(const iron_conv_plan_t *cp,
                          iron_cudnn_call_t out_calls[2]);

// Plans `call` for the convolution `cp` (validated by iron_conv_plan_read).
// allow_tf32: f32 may use TF32 (DEFAULT precision and IRON_CUDA_TF32 not
// "0", decided by the caller). Returns false with the reason in `why` when
// cuDNN cannot compute it this way (dtype, rank, a padding symmetric
// padding cannot reach, sizes beyond cuDNN's 32-bit descriptors, ...).
bool iron_cudnn_plan_make(const iron_conv_plan_t *cp, iron_cudnn_call_t call,
                          bool allow_tf32, iron_cudnn_plan_t *out, char *why,
                          size_t why_cap);

// The same with `packed`: x is never a sub-view (cropped inputs are
// copied, a partial dx is computed into a buffer of its own), for when
// cuDNN refuses the strides of a sub-view.
bool iron_cudnn_plan_make_packed(const iron_conv_plan_t *cp,
                                 iron_cudnn_call_t call, bool allow_tf32,
                                 bool packed, iron_cudnn_plan_t *out,
                                 char *why, size_t why_cap);

// Elements of buffer `buf` of a plan's op (operands and result from cp).
int64_t iron_cudnn_plan_buf_elems(const iron_conv_plan_t *cp,
                                  const iron_cudnn_plan_t *plan, int32_t buf);

// The staging copy as a CUDA kernel `name(const T *src, T *dst)` for
// elements of `elem_size` bytes (2, 4 or 8): one thread per element of
// the box, 1-D grid of 256-thread blocks (*out_grid), grid-stride loop;
// offsets are baked in (the caller passes the buffers' base pointers).
iron_status_t iron_cudnn_gen_copy(const char *name, size_t elem_size,
                                  const iron_cudnn_copy_t *c, char **out_src,
                                  unsigned *out_grid);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_CUDNN_PLAN_H_
