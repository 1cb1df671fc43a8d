// stablehlo.convolution through cuDNN on the CUDA device (cuda_conv.c's
// first choice when cuDNN is there). At prepare time: the op is mapped to
// a cuDNN call (cuda_cudnn_plan.h), its descriptors are built, an
// algorithm is chosen (cuDNN's heuristics, or measured with cudnnFind*Ex
// under IRON_CUDA_CUDNN=find) and tried once on scratch buffers; anything
// cuDNN refuses leaves the op to cuda_conv.c's own kernels. At run time:
// staging copies, one cuDNN call on the device's stream, workspace and
// staging buffers from the device's stream-ordered allocator (all of it
// graph-capturable).
//
// Switches (read at prepare): IRON_CUDA_CUDNN=0 never uses cuDNN, "find"
// chooses algorithms by measurement; IRON_CUDA_CUDNN_DEBUG=1 says on
// stderr which call and algorithm each convolution got, or why it kept the
// CUDA device's own kernels (cuDNN absent, refused, ...).
#ifndef IRON_DEVICE_CUDA_CUDA_CUDNN_H_
#define IRON_DEVICE_CUDA_CUDA_CUDNN_H_

#include <stdbool.h>
#include <stddef.h>

#include "device/cuda/cuda_cudnn_api.h"
#include "device/cuda/cuda_cudnn_plan.h"
#include "device/cuda/cuda_device.h"

#ifdef __cplusplus
extern "C" {
#endif

// A convolution prepared for cuDNN (owned by the kernel's params).
typedef struct iron_cudnn_conv iron_cudnn_conv_t;

// Tries to prepare `op` (already validated by iron_cuda_conv_plan) for
// cuDNN on `dev`. OK with *out_conv NULL when cuDNN does not take it
// (switched off, absent, unusable on this device, or refused: the caller
// keeps its own kernels); errors only for failures that keep any path from
// working (out of memory, a kernel request that fails).
iron_status_t iron_cuda_cudnn_conv_prepare(iron_cuda_device_t *dev,
                                           const iron_ir_op_t *op,
                                           iron_cudnn_conv_t **out_conv);

// Enqueues the convolution on dev's stream: lhs, rhs, out are the device
// pointers of the op's operands and result.
iron_status_t iron_cuda_cudnn_conv_run(iron_cuda_device_t *dev,
                                       const iron_cudnn_conv_t *conv,
                                       const void *lhs, const void *rhs,
                                       void *out);

void iron_cuda_cudnn_conv_destroy(iron_cudnn_conv_t *conv);

// Releases the device's cuDNN handle and its state (device teardown, with
// the context current). Safe when cuDNN was never used.
void iron_cuda_cudnn_release(iron_cuda_device_t *dev);

// --- GPU-free pieces (tests drive them with real or fake tables) ---------

// The descriptors of a plan (created with `api`; no handle, no GPU).
typedef struct iron_cudnn_descs {
  cudnnTensorDescriptor_t x, y;
  cudnnFilterDescriptor_t w;
  cudnnConvolutionDescriptor_t conv;
} iron_cudnn_descs_t;

// Creates the plan's descriptors (math type: FMA for exact f32, tensor
// cores otherwise). On error, nothing stays allocated.
iron_status_t iron_cudnn_descs_create(const iron_cudnn_api_t *api,
                                      const iron_cudnn_plan_t *plan,
                                      iron_cudnn_descs_t *out);
void iron_cudnn_descs_destroy(const iron_cudnn_api_t *api,
                              iron_cudnn_descs_t *d);

// The algorithm a plan runs with.
typedef struct iron_cudnn_choice {
  int algo;
  int math_type;
  size_t workspace;
  float time_ms;  // Find's measurement, or -1
} iron_cudnn_choice_t;

// Picks from cuDNN's candidates (heuristics or Find results, best first)
// the first that succeeded, has a deterministic algorithm whose result is
// a sum of exact products (implicit/explicit GEMM and direct kinds; FFT
// and Winograd transform the operands), needs at most `ws_limit` bytes of
// workspace and, for exact f32, runs without TF32. false with the reason
// in `why` when none does.
bool iron_cudnn_pick(const iron_cudnn_plan_t *plan,
                     const iron_cudnn_algo_perf_t *perf, int n,
                     size_t ws_limit, iron_cudnn_choice_t *out, char *why,
                     size_t why_cap);

// Asks cuDNN's heuristics for the plan's candidates and picks one
// (iron_cudnn_pick), then confirms it with the workspace query of the
// chosen algorithm (which fails for unsupported configurations) and sets
// the descriptor's math type to it. false (not an error) when cuDNN
// refuses, with the reason in `why`.
bool iron_cudnn_choose(const iron_cudnn_api_t *api, cudnnHandle_t handle,
                       const iron_cudnn_plan_t *plan,
                       const iron_cudnn_descs_t *d, size_t ws_limit,
                       iron_cudnn_choice_t *out, char *why, size_t why_cap);

// The per-device state behind dev->cudnn: created on the first
// convolution with `api` (the process-wide table, or a test's fake).
// false when cuDNN is unusable on the device, with the reason in `why`
// (remembered: later calls answer the same without retrying).
typedef struct iron_cudnn_device iron_cudnn_device_t;
bool iron_cudnn_device_get(iron_cuda_device_t *dev,
                           const iron_cudnn_api_t *api,
                           iron_cudnn_device_t **out, char *why,
                           size_t why_cap);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_CUDNN_H_
