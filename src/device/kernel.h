// The kernel contract every device implements. Every op a device executes
// (other than the ones the runtime handles itself: constant, control flow,
// func.call, return, optimization_barrier, sharding annotations) is a
// kernel: a prepare step run once at compile time and a run step run on
// every execute. The compiler (src/compiler/plan.c) fills this contract in;
// devices never call back up into the compiler or the runtime except
// through the function pointers of iron_kernel_ctx_t.
//
// Threading: `run` may be called concurrently from several executions with
// the same params; params are read-only after prepare. Host kernels split
// their own work with iron_threadpool_parallel_for(ctx->pool, ...).
#ifndef IRON_DEVICE_KERNEL_H_
#define IRON_DEVICE_KERNEL_H_

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

struct iron_device;

// A dense row-major array. The runtime owns `data` (a host pointer on the
// host device, a device pointer on devices with their own memory).
typedef struct iron_tensor {
  void *data;
  iron_dtype_t dtype;
  int32_t rank;
  int64_t dims[IRON_MAX_RANK];
  int64_t count;  // product of dims (1 for rank 0)
  size_t nbytes;  // count * iron_dtype_size(dtype)
} iron_tensor_t;

// A region of a kernel op (reduce body, comparator, scatter update ...) as
// the plan prepared it. Kernels read the public fields; the runtime runs
// the region through ctx->call_region. The plan owns it (as long as the
// kernel's params).
typedef struct iron_region {
  // The IR it was compiled from, for pattern matching in prepare and for
  // device code generators that translate region IR themselves.
  const iron_ir_region_t *ir;
  // The module holding the functions the region's func.call ops name.
  const iron_ir_module_t *module;
  // Every op is element-wise, so call_region may run it on vectors (see
  // iron_kernel_ctx_t.call_region).
  bool elementwise;
} iron_region_t;

typedef struct iron_kernel_ctx iron_kernel_ctx_t;

struct iron_kernel_ctx {
  iron_threadpool_t *pool;  // may be NULL: run single-threaded
  // Runs a region on the given tensors. `inputs` has one tensor per block
  // argument, `outputs` one per returned value, allocated by the caller
  // with the right dtype.
  //
  // Element-wise mode: when region->elementwise, it may be called with
  // every input and output of `count` N (any rank/dims, all the same), even
  // though the IR types are rank 0; inputs of count 1 are broadcast. This
  // is how reduce bodies are evaluated on whole vectors at a time.
  iron_status_t (*call_region)(const iron_kernel_ctx_t *ctx,
                               const iron_region_t *region,
                               const iron_tensor_t *const *inputs,
                               iron_tensor_t *const *outputs);
  void *runtime;  // opaque to kernels
  // The device running the kernel (CUDA kernels find their stream here).
  struct iron_device *dev;
};

typedef struct iron_kernel {
  const char *name;  // for diagnostics, e.g. "elementwise_binary"
  // Compile time. Validates the op (dtypes, attributes, shapes) and builds
  // malloc'ed params (or NULL). An unsupported variant must return
  // iron_ir_op_unimplemented(op, "for dtype %s", ...). `regions` holds the
  // op's regions (op->num_regions entries), valid as long as params.
  iron_status_t (*prepare)(const iron_ir_op_t *op,
                           iron_region_t *const *regions, void **out_params);
  // Execute time. `inputs`/`outputs` follow the op's operands/results; the
  // runtime allocated every output with the shape of the result type (or,
  // in element-wise region mode, with the common count; see call_region).
  // Outputs do not alias inputs unless `inplace_ok`.
  iron_status_t (*run)(const iron_kernel_ctx_t *ctx, const void *params,
                       const iron_tensor_t *const *inputs,
                       iron_tensor_t *const *outputs);
  void (*destroy)(void *params);  // optional: NULL means free()
  // True if output i may share memory with input i' of equal byte size
  // (every element is read before the same element is written).
  bool inplace_ok;
  // True if the op is element-wise (usable in vectorized regions).
  bool elementwise;
  // Optional: used instead of `prepare` when set, for kernels that need
  // their device at compile time (CUDA: generated code for its
  // architecture).
  iron_status_t (*prepare_on)(struct iron_device *dev, const iron_ir_op_t *op,
                              iron_region_t *const *regions,
                              void **out_params);
  // True if `run` only enqueues device work on the device's stream (no
  // reads back to the host, no waiting for the device, no host-side state
  // that changes per call), so a device graph may record it once and
  // replay it (device.h, graph_begin). Temporary memory must come from
  // iron_storage_allocate and be released before `run` returns.
  bool graph_capturable;
} iron_kernel_t;

// A device's kernels, indexed by op kind (NULL: no kernel, the op is
// refused at compile time).
typedef const iron_kernel_t *iron_kernel_table_t[IRON_OP_COUNT];

// The reference kernels: the host device's (src/device/host), one for every
// op, on host memory. Regions of kernel ops are planned with these on every
// device (the host runs them through call_region; other devices generate
// code from their IR), and devices with their own memory run ops only the
// CPU can run through them on staged copies.
const iron_kernel_t *iron_reference_kernel_lookup(iron_op_kind_t kind);
// The reference kernel of a custom_call target that must run on the CPU in
// the caller's process (host callbacks: custom_call @iron_python_callback),
// or NULL for any other target.
const iron_kernel_t *iron_reference_callback_kernel(const char *target);
// The reference kernel that runs custom_call `target` (host callbacks,
// jaxlib's LAPACK and tridiagonal targets), or NULL when the reference
// device does not know the target.
const iron_kernel_t *iron_reference_custom_call_kernel(const char *target);

// Helpers shared by kernels.

// A rank-1 view of `count` elements at `data` (for call_region on vectors).
static inline iron_tensor_t iron_tensor_vector(void *data, iron_dtype_t dt,
                                               int64_t count) {
  iron_tensor_t t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.dtype = dt;
  t.rank = 1;
  t.dims[0] = count;
  t.count = count;
  t.nbytes = (size_t)count * iron_dtype_size(dt);
  return t;
}

static inline void iron_tensor_strides(const iron_tensor_t *t,
                                       int64_t *out_strides) {
  int64_t s = 1;
  for (int32_t i = t->rank - 1; i >= 0; --i) {
    out_strides[i] = s;
    s *= t->dims[i];
  }
}

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_KERNEL_H_
