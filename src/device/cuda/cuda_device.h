// The CUDA device: one iron_device_t per NVIDIA GPU (ARCHITECTURE: devices
// behind one vtable). Storage is device memory from the device's
// stream-ordered pool; all work (kernels, copies, frees) goes to one stream
// per device, in FIFO job order; events complete when the stream reaches
// them. An asynchronous fault is kept (sticky) and returned by every later
// call.
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
  iron_status_t sticky;  // first asynchronous fault (guarded by mu)
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
  // Graph recording (vtable graph_*, cuda_device.c). The recording thread
  // holds graph_mu from graph_begin to graph_end; other threads that would
  // enqueue work on `stream` meanwhile wait for it (their work would
  // otherwise become part of the graph).
  pthread_mutex_t graph_mu;
  _Atomic bool capturing;
  pthread_t capture_thread;
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

// Records `st` as the device's sticky error if it has none (takes
// ownership); returns a copy of the sticky error (or OK).
iron_status_t iron_cuda_device_fail(iron_cuda_device_t *d, iron_status_t st);

// The CUDA device's kernel table (filled by the iron_cuda_register_* hooks).
const iron_kernel_t *iron_cuda_kernel_lookup(iron_op_kind_t kind);
// Whether the fusion generator takes `op` (the vtable's `fusable`).
bool iron_cuda_fusable(const iron_ir_op_t *op);
typedef const iron_kernel_t *iron_cuda_kernel_table_t[IRON_OP_COUNT];
void iron_cuda_register_elementwise(iron_cuda_kernel_table_t table);
void iron_cuda_register_shape(iron_cuda_kernel_table_t table);
void iron_cuda_register_ops(iron_cuda_kernel_table_t table);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_DEVICE_H_
