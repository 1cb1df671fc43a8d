// The CUDA device: one iron_device_t per NVIDIA GPU (ARCHITECTURE: devices
// behind one vtable). Storage is device memory from the device's
// stream-ordered pool; all work (kernels, copies, frees) goes to one stream
// per device, in FIFO job order; events complete when the stream reaches
// them.
//
// Errors (docs/ARCHITECTURE.md, "What fails a call, what retires a
// device"): a driver error fails the call that saw it and nothing else,
// unless it is a sticky fault of the context (iron_cuda_error_is_sticky:
// illegal address, launch failure, ECC, ...). Such a fault retires the
// device: it is kept (sticky) and returned by every later call, naming the
// last steps (op, source line, kernel) enqueued before it was seen
// (base.recent).
#ifndef IRON_DEVICE_CUDA_CUDA_DEVICE_H_
#define IRON_DEVICE_CUDA_CUDA_DEVICE_H_

#include <pthread.h>

#include "device/cuda/cuda_api.h"
#include "device/device.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_cuda_compiler iron_cuda_compiler_t;  // cuda_compile.h

typedef struct iron_cuda_device {
  iron_device_t base;  // first: (iron_device_t *) casts both ways
  const iron_cuda_api_t *api;
  int ordinal;
  CUdevice cu_dev;
  CUcontext ctx;  // the primary context (retained)
  CUstream stream;
  CUmemoryPool pool;
  int cc_major, cc_minor;  // compute capability (9, 0 on H200)
  int num_sms;
  int max_smem_optin;  // bytes of shared memory per block (opt-in)
  size_t total_mem;
  char name[128];         // "NVIDIA H200"
  char arch[16];          // NVRTC arch for SASS, e.g. "sm_90a"
  cublasLtHandle_t lt;    // cuBLASLt handle (NULL until first GEMM)
  CUdeviceptr lt_workspace;
  size_t lt_workspace_size;
  iron_cuda_compiler_t *compiler;  // generated kernels (cuda_compile.h)
  // cuDNN handle and state (cuda_cudnn.c; NULL until the first convolution).
  struct iron_cudnn_device *cudnn;
  pthread_mutex_t mu;
  iron_status_t sticky;  // the sticky fault that retired it (guarded by mu)

  // Freed blocks kept for reuse, by rounded size (cuda_device.c): all work
  // runs on `stream`, so a block freed by one step can be handed to the
  // next without a driver call. IRON_CUDA_ALLOC_CACHE=0 turns it off.
  bool cache_on;
  pthread_mutex_t cache_mu;
  struct iron_cuda_block_list *cache;  // array of IRON_CUDA_CACHE_CLASSES
  size_t cache_bytes;
  // Pinned buffers that host-to-device copies are staged through, so that
  // they need not wait for the stream (cuda_device.c; guarded by mu).
  struct iron_cuda_staging *staging;
  int num_staging;
  // Graph recording (vtable graph_*, cuda_device.c). Every use of `stream`
  // by a thread that is not recording (enqueue through its wait) holds
  // stream_lock for reading; the recording thread holds it for writing from
  // graph_begin to graph_end. Work another thread put on the stream while
  // it is being recorded would become part of the graph instead of
  // running, and its cuStreamSynchronize would fail with
  // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED.
  pthread_rwlock_t stream_lock;
  _Atomic bool capturing;
  pthread_t capture_thread;
  // Set by the recording thread when it asked for something a graph cannot
  // hold (a copy to or from the host, a wait for the device): refused
  // without touching the stream, and graph_end discards the recording.
  bool capture_spoiled;
  // Graph memory (allocated while recording) not freed yet: normally empty
  // at graph_end; after a discarded recording, pointers whose storages are
  // still alive (their memory never existed: they are dropped, not freed).
  struct iron_cuda_graph_ptr *graph_ptrs;
  _Atomic size_t num_graph_ptrs;  // written under cache_mu
  size_t cap_graph_ptrs;
  // Frees of ordinary memory asked for while recording: done after the
  // recording ends, and the graph is discarded (it may use that memory).
  struct iron_cuda_graph_ptr *deferred;
  size_t num_deferred, cap_deferred;
  bool deferred_lost;  // a deferred free could not be remembered
  // Host memory (vtable host_mem_free) freed by the recording thread: freed
  // once the recording ends (guarded by mu).
  struct iron_cuda_graph_ptr *host_deferred;
  size_t num_host_deferred, cap_host_deferred;
  // Device while loops (IRON_CUDA_DEVICE_WHILE; cuda_device.c): on when the
  // driver has graph conditional nodes (api->has_conditional) and the
  // set-condition kernel loaded, decided once when the device is created.
  // The executor records a loop body into the body graph of a WHILE
  // conditional node; `while_set_fn` (iron_while_set_condition(pred,
  // handle)) sets the node's condition on the GPU.
  bool device_while;
  struct iron_cuda_function *while_set_fn;
  // Allocations a loop recording needs that the block cache cannot serve
  // are made on this stream and waited for (a loop body cannot hold
  // allocation nodes; the captured stream cannot take ordinary work).
  CUstream alloc_stream;
  // The loop being recorded (graph_while_begin .. graph_end; recording
  // thread only): its graph, condition handle, and the ordinary blocks it
  // hands out as memory (owned by the graph once kept).
  bool while_recording;
  CUgraph while_graph;
  CUgraphConditionalHandle while_handle;
  struct iron_cuda_while_block *while_blocks;
  size_t num_while_blocks, cap_while_blocks;
  // IRON_CUDA_TEST_FAULT=<op or kernel name>[:trap] (tests only): launches
  // of that op's generated kernels run a kernel that writes out of bounds
  // (or traps) instead; NULL when the switch is unset.
  char *test_fault_match;
  struct iron_cuda_function *test_fault_fn;
  // The batched copy kernel (vtable copy_batch), compiled on first use;
  // NULL until then or when IRON_CUDA_COPY_BATCH=0 / NVRTC failed
  // (copy_batch_state: 0 not tried, 1 ready, -1 unavailable). Tests set
  // both to use a fake kernel.
  struct iron_cuda_function *copy_batch_fn;
  _Atomic int copy_batch_state;
} iron_cuda_device_t;

// Number of CUDA devices usable by ironjax: 0 when the driver or a GPU is
// absent (then *out_reason, if not NULL, says why; static string storage
// owned by the API table).
int iron_cuda_device_count(const char **out_reason);

// Creates the device for GPU `ordinal` as runtime device `id`. Errors name
// a missing library/symbol (iron_cuda_api_require) or the failing call.
iron_status_t iron_cuda_device_create(iron_runtime_t *rt, int id, int ordinal,
                                      iron_device_t **out_device);

static inline iron_cuda_device_t *iron_cuda_device_cast(iron_device_t *dev) {
  return (iron_cuda_device_t *)dev;
}

// Makes the device's context current on the calling thread (cheap when it
// already is). Every entry point that calls the driver does this first.
iron_status_t iron_cuda_device_enter(iron_cuda_device_t *d);

// Retires the device: records `st` (a sticky fault, see
// iron_cuda_error_is_sticky) as the device's sticky error if it has none
// (takes ownership), adding which op and kernel were enqueued last; returns
// a copy of the sticky error. Use iron_cuda_device_check for a CUresult.
iron_status_t iron_cuda_device_fail(iron_cuda_device_t *d, iron_status_t st);

// The status of a driver call on the device (`what` names it): OK for
// success; a sticky fault retires the device (iron_cuda_device_fail) and
// returns the sticky error; any other error is returned as it is and the
// device stays usable (RESOURCE_EXHAUSTED for out of memory).
iron_status_t iron_cuda_device_check(iron_cuda_device_t *d, CUresult r,
                                     const char *what);

// The device's sticky error (a copy) or OK.
iron_status_t iron_cuda_device_sticky(iron_cuda_device_t *d);

// For iron_cuda_launch: when IRON_CUDA_TEST_FAULT names the op being run or
// the kernel `kernel_name`, the fault kernel to launch instead (else NULL).
struct iron_cuda_function *iron_cuda_device_test_fault(
    iron_cuda_device_t *d, const char *kernel_name);

// The CUDA C of the device loops' set-condition kernel
// (iron_while_set_condition(const uint8_t *pred, handle): sets the WHILE
// node's condition to pred[0] != 0 through cudaGraphSetConditional), for
// GPU-free NVRTC checks.
const char *iron_cuda_device_while_source(void);
// Whether IRON_CUDA_DEVICE_WHILE allows device while loops ("1"); read
// once.
bool iron_cuda_device_while_enabled(void);
// The CUDA C of IRON_CUDA_TEST_FAULT's kernels (iron_test_fault_oob,
// iron_test_fault_trap), for GPU-free NVRTC checks.
const char *iron_cuda_device_test_fault_source(void);
// The batched copy kernel's source (tests compile it with NVRTC): kernel
// iron_copy_batch(const iron_copy_entry_t *table, unsigned long long n),
// grid row y copies entry y (device.h, copy_batch).
const char *iron_cuda_device_copy_batch_source(void);

// For tests: creates the device on driver table `api` (GPU-free with a fake
// driver; iron_cuda_device_create checks the process's GPUs first).
iron_status_t iron_cuda_device_create_with_api(iron_runtime_t *rt, int id,
                                               int ordinal,
                                               const iron_cuda_api_t *api,
                                               iron_device_t **out_device);

// The CUDA device's kernel table (filled by the iron_cuda_register_* hooks).
const iron_kernel_t *iron_cuda_kernel_lookup(iron_op_kind_t kind);
// Whether the fusion generator takes `op` (the vtable's `fusable`).
bool iron_cuda_fusable(const iron_ir_op_t *op);
// Whether transpose `op` may pivot a fusion (the vtable's `pivot_fusable`;
// IRON_CUDA_TRANSPOSE_FUSION).
bool iron_cuda_pivot_fusable(const iron_ir_op_t *op);
// Whether dot `op` becomes a fused reduction (the vtable's `vector_dot`,
// src/compiler/vector_dot.h); `matrix` is its non-vector operand.
// IRON_CUDA_VECTOR_DOTS: `sliced` (default) when the matrix is a slice or
// dynamic_slice (through reshapes and converts): the fused reduction reads
// it in place where the library GEMV needs a copy; `all` every vector dot;
// `0` none.
bool iron_cuda_vector_dot(const iron_ir_op_t *op, uint32_t matrix);
typedef const iron_kernel_t *iron_cuda_kernel_table_t[IRON_OP_COUNT];
void iron_cuda_register_elementwise(iron_cuda_kernel_table_t table);
void iron_cuda_register_shape(iron_cuda_kernel_table_t table);
void iron_cuda_register_ops(iron_cuda_kernel_table_t table);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_DEVICE_H_
