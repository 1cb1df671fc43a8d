// Host-staged steps on the CUDA device: ops the GPU has no kernel for but the
// host does (host callbacks, jaxlib's LAPACK and tridiagonal custom calls,
// stablehlo.cholesky/triangular_solve) run the HOST kernel on the CPU, with
// their operands copied from the device and their results copied back.
//
// One wrapper serves them all: its prepare runs the host kernel's prepare at
// compile time (so an unsupported variant is refused by name there, as on
// the host device) and keeps its params; its run waits for the device's
// queued work (the operands are produced by earlier kernels), copies every
// non-token operand device -> host, runs the host kernel on the host copies
// and copies every result host -> device, ordered before any later work on
// the device. The copies go through the device vtable (memcpy, job_sync),
// so the wrapper works for any device with its own memory.
//
// A staged step reads device memory back and waits for the device: it is
// not graph_capturable, so a loop body holding one is never recorded as a
// CUDA graph (it runs step by step, each iteration's callback in order).
//
// IRON_CUDA_HOST_STAGED=0 (read at compile time) refuses these ops at compile
// time by name instead, as before they existed.
#ifndef IRON_DEVICE_CUDA_CUDA_HOST_STAGED_H_
#define IRON_DEVICE_CUDA_CUDA_HOST_STAGED_H_

#include <stdbool.h>

#include "device/cuda/cuda_device.h"

#ifdef __cplusplus
extern "C" {
#endif

// Whether host-staged steps are enabled (IRON_CUDA_HOST_STAGED, default 1).
bool iron_cuda_host_staged_enabled(void);

// The host kernel that the CUDA device stages for custom_call target
// `target` (the host callback kernel, or the host's custom_call kernel for
// jaxlib's LAPACK and tridiagonal targets), or NULL when the host has none.
// The host kernel's prepare may still refuse a variant of the target.
const iron_kernel_t *iron_cuda_custom_call_host_kernel(
    const char *target);

// Prepares `host` (a host kernel) for `op` and wraps its params for a
// host-staged run; `out_params` are params of iron_cuda_host_staged_kernel.
// Errors are the host prepare's (UNIMPLEMENTED naming the op).
iron_status_t iron_cuda_host_staged_prepare(const iron_kernel_t *host,
                                            const iron_ir_op_t *op,
                                            iron_region_t *const *regions,
                                            void **out_params);

// The wrapper kernel ("host_staged"), whose params come from
// iron_cuda_host_staged_prepare. Its own prepare_on picks the host kernel:
// for custom_call by target (iron_cuda_custom_call_host_kernel; "dce_sink"
// becomes a step that does nothing), else the host kernel of op->kind.
extern const iron_kernel_t iron_cuda_host_staged_kernel;

// The host kernel that wrapper params run (NULL: a step that does nothing).
// For tests and diagnostics.
const iron_kernel_t *iron_cuda_host_staged_inner(const void *params);

// Registers the wrapper for custom_call and for the ops the host runs that
// have no CUDA kernel (cholesky, triangular_solve).
void iron_cuda_register_host_staged(iron_cuda_kernel_table_t table);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_HOST_STAGED_H_
