// The host device's kernel interface. Every op the host executes (other than
// the ones the runtime handles itself: constant, control flow, func.call,
// return, optimization_barrier, sharding annotations) is a kernel: a prepare
// step run once at compile time and a run step run on every execute.
//
// Threading: `run` may be called concurrently from several executions with the
// same params; params are read-only after prepare. Kernels split their own work
// with iron_threadpool_parallel_for(ctx->pool, ...).
#ifndef IRON_DEVICE_HOST_HOST_KERNEL_H_
#define IRON_DEVICE_HOST_HOST_KERNEL_H_

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// A dense row-major array on the host. The runtime owns `data`.
typedef struct iron_tensor {
  void *data;
  iron_dtype_t dtype;
  int32_t rank;
  int64_t dims[IRON_MAX_RANK];
  int64_t count;  // product of dims (1 for rank 0)
  size_t nbytes;  // count * iron_dtype_size(dtype)
} iron_tensor_t;

// A region of an op (reduce body, comparator ...) compiled by the runtime.
typedef struct iron_host_region iron_host_region_t;
typedef struct iron_host_ctx iron_host_ctx_t;

struct iron_host_ctx {
  iron_threadpool_t *pool;  // may be NULL: run single-threaded
  // Runs a compiled region on the given tensors. `inputs` has one tensor per
  // block argument, `outputs` one per returned value, allocated by the
  // caller with the right dtype.
  //
  // Element-wise mode: when the region holds only element-wise ops (see
  // iron_host_region_is_elementwise), it may be called with every input and
  // output of `count` N (any rank/dims, all the same), even though the IR
  // types are rank 0; inputs of count 1 are broadcast. This is how reduce
  // bodies are evaluated on whole vectors at a time.
  iron_status_t (*call_region)(const iron_host_ctx_t *ctx,
                               const iron_host_region_t *region,
                               const iron_tensor_t *const *inputs,
                               iron_tensor_t *const *outputs);
  void *runtime;  // opaque to kernels
  // The device running the kernel (CUDA kernels find their stream here).
  struct iron_device *dev;
};

// True when every op in the region is element-wise (so call_region can run it
// on vectors). Implemented by the runtime.
bool iron_host_region_is_elementwise(const iron_host_region_t *region);
// The IR region this was compiled from (for pattern matching in prepare).
const iron_ir_region_t *iron_host_region_ir(const iron_host_region_t *region);
// The module holding the functions the region's func.call ops name.
const iron_ir_module_t *iron_host_region_module(
    const iron_host_region_t *region);

typedef struct iron_host_kernel {
  const char *name;  // for diagnostics, e.g. "elementwise_binary"
  // Compile time. Validates the op (dtypes, attributes, shapes) and builds
  // malloc'ed params (or NULL). An unsupported variant must return
  // iron_ir_op_unimplemented(op, "for dtype %s", ...). `regions` holds the
  // op's compiled regions (op->num_regions entries), valid as long as params.
  iron_status_t (*prepare)(const iron_ir_op_t *op,
                           iron_host_region_t *const *regions,
                           void **out_params);
  // Execute time. `inputs`/`outputs` follow the op's operands/results; the
  // runtime allocated every output with the shape of the result type (or, in
  // element-wise region mode, with the common count; see call_region).
  // Outputs do not alias inputs unless `inplace_ok`.
  iron_status_t (*run)(const iron_host_ctx_t *ctx, const void *params,
                       const iron_tensor_t *const *inputs,
                       iron_tensor_t *const *outputs);
  void (*destroy)(void *params);  // optional: NULL means free()
  // True if output i may share memory with input i' of equal byte size
  // (every element is read before the same element is written).
  bool inplace_ok;
  // True if the op is element-wise (usable in vectorized regions).
  bool elementwise;
  // Optional: used instead of `prepare` when set, for kernels that need their
  // device at compile time (CUDA: generated code for its architecture).
  iron_status_t (*prepare_on)(struct iron_device *dev, const iron_ir_op_t *op,
                              iron_host_region_t *const *regions,
                              void **out_params);
  // True if `run` only enqueues device work on the device's stream (no
  // reads back to the host, no waiting for the device, no host-side state
  // that changes per call), so a device graph may record it once and replay
  // it (device.h, graph_begin). Temporary memory must come from
  // iron_storage_allocate and be released before `run` returns.
  bool graph_capturable;
} iron_host_kernel_t;

// The kernel for an op kind, or NULL if the host has none.
const iron_host_kernel_t *iron_host_kernel_lookup(iron_op_kind_t kind);

// Each kernel file fills its entries of the table (indexed by op kind).
// Called once from iron_host_kernel_lookup's table initialisation.
typedef const iron_host_kernel_t *iron_host_kernel_table_t[IRON_OP_COUNT];
void iron_host_register_fusion(iron_host_kernel_table_t table);
// The host's fusion predicate under IRON_HOST_TEST_FUSION=1 (fusion.c).
bool iron_host_fusable_for_testing(const iron_ir_op_t *op);
void iron_host_register_elementwise(iron_host_kernel_table_t table);
void iron_host_register_convert(iron_host_kernel_table_t table);
void iron_host_register_shape(iron_host_kernel_table_t table);
void iron_host_register_dot(iron_host_kernel_table_t table);
void iron_host_register_reduce(iron_host_kernel_table_t table);
void iron_host_register_rng(iron_host_kernel_table_t table);
void iron_host_register_sort(iron_host_kernel_table_t table);
void iron_host_register_window(iron_host_kernel_table_t table);
void iron_host_register_gather(iron_host_kernel_table_t table);
void iron_host_register_reduce_precision(iron_host_kernel_table_t table);
void iron_host_register_conv(iron_host_kernel_table_t table);
void iron_host_register_fft(iron_host_kernel_table_t table);
void iron_host_register_custom_call(iron_host_kernel_table_t table);
void iron_host_register_linalg(iron_host_kernel_table_t table);
void iron_host_register_collective(iron_host_kernel_table_t table);

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

#endif  // IRON_DEVICE_HOST_HOST_KERNEL_H_
