// The device interface: every device (the host, one per CUDA GPU) is a struct
// whose first member is iron_device_t with its vtable. The runtime
// (src/runtime) owns devices; buffers and executables keep the runtime alive,
// so a device outlives everything that points at it.
//
// Each device runs its work on one worker thread, FIFO (ARCHITECTURE decision
// 7): a job enqueued after another sees all of that job's effects. With
// IRON_SYNC=1 jobs run inline on the enqueuing thread instead (debugging).
//
// Storage: ref-counted, 64-byte aligned device memory; the header and the
// bytes are one allocation, so a tensor costs one malloc.
#ifndef IRON_DEVICE_DEVICE_H_
#define IRON_DEVICE_DEVICE_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "base/threadpool.h"
#include "device/kernel.h"
#include "iron/iron.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_storage {
  atomic_int ref;
  iron_device_t *dev;  // bytes are accounted to dev (NULL: not accounted)
  size_t nbytes;       // bytes requested
  size_t accounted;    // bytes added to dev->bytes_in_use
  void *data;          // 64-byte aligned; never NULL (0 bytes: a dummy)
  // Pinned storage is not freed when its count drops to 0: whoever pinned it
  // (the executor's graph mode, for a loop carry's home buffer) still owns
  // it and revives or frees it (iron_storage_unpin).
  bool pinned;
  // In the page-locked host memory of a device with its own memory
  // (IRON_MEMORY_HOST on a device with vtable->host_mem_alloc): `data` is a
  // CPU address, the bytes are not counted in bytes_in_use.
  bool host_memory;
} iron_storage_t;
// On a device with vtable->mem_alloc, `data` of a storage of nbytes > 0 is
// device memory (from mem_alloc, returned by mem_free), not addressable by
// the CPU: read and write it with vtable->memcpy. Host-memory storage
// (`host_memory`) is the exception: the CPU reads and writes it directly.

// New storage of `nbytes` (contents undefined) with one reference.
// RESOURCE_EXHAUSTED naming the byte count when memory runs out; nothing else
// is affected then. `dev` may be NULL (unaccounted, e.g. executable
// constants).
iron_status_t iron_storage_allocate(iron_device_t *dev, size_t nbytes,
                                    iron_storage_t **out_storage);
// The same in a memory space of `dev`: IRON_MEMORY_HOST on a device with
// vtable->host_mem_alloc gives host-memory storage; everywhere else both
// spaces are the device's own memory.
iron_status_t iron_storage_allocate_in(iron_device_t *dev,
                                       iron_memory_space_t space,
                                       size_t nbytes,
                                       iron_storage_t **out_storage);
// The device whose memory holds `s`'s bytes for iron_storage_copy: NULL
// (the CPU's) for host-memory storage, else `dev`.
static inline iron_device_t *iron_storage_copy_device(const iron_storage_t *s,
                                                      iron_device_t *dev) {
  return s->host_memory ? NULL : dev;
}
static inline void iron_storage_retain(iron_storage_t *s) {
  if (s) atomic_fetch_add_explicit(&s->ref, 1, memory_order_relaxed);
}
void iron_storage_release(iron_storage_t *s);
// Ends pinning: with `revive`, a storage whose count dropped to 0 while
// pinned gets one reference again (the caller's); otherwise one at 0 is
// freed now. Returns whether the storage still exists.
bool iron_storage_unpin(iron_storage_t *s, bool revive);
static inline int iron_storage_refcount(const iron_storage_t *s) {
  return atomic_load_explicit(&((iron_storage_t *)s)->ref,
                              memory_order_acquire);
}

// A unit of work on a device's worker thread. `run` owns the job (frees it).
typedef struct iron_job iron_job_t;
struct iron_job {
  void (*run)(iron_job_t *job);
  iron_job_t *next;
};

// One entry of a batched copy (vtable copy_batch): `n` bytes from `src` to
// `dst`, both device addresses.
typedef struct iron_copy_entry {
  uint64_t dst, src, n;
} iron_copy_entry_t;

typedef enum iron_copy_kind {
  IRON_COPY_HOST_TO_DEVICE,
  IRON_COPY_DEVICE_TO_HOST,
  IRON_COPY_DEVICE_TO_DEVICE,
} iron_copy_kind_t;

// A device's entry points. Everything after `destroy` is optional: NULL means
// "as the host does" (memory the CPU addresses directly, memcpy, host
// kernels). Devices with their own memory (CUDA) fill them in.
typedef struct iron_device_vtable {
  const char *kind;  // "host", "cuda"
  void (*destroy)(iron_device_t *dev);

  // Device memory for storage (nbytes > 0). Thread-safe. May be
  // stream-ordered: the memory is valid for work enqueued on this device
  // after the call. RESOURCE_EXHAUSTED naming the size when it runs out.
  iron_status_t (*mem_alloc)(iron_device_t *dev, size_t nbytes,
                             void **out_ptr);
  // Frees after all work enqueued on the device so far. Thread-safe; never
  // fails (a sticky device error is kept by the device).
  void (*mem_free)(iron_device_t *dev, void *ptr, size_t nbytes);
  // Copies `n` bytes, ordered after the work enqueued on the device so far.
  // Any thread. HOST_TO_DEVICE may return before the copy ran only if `src`
  // was already captured (callers may free `src` on return);
  // DEVICE_TO_HOST returns once the bytes are in `dst`.
  iron_status_t (*memcpy)(iron_device_t *dev, void *dst, const void *src,
                          size_t n, iron_copy_kind_t kind);
  // Page-locked host memory (nbytes > 0) for buffers in IRON_MEMORY_HOST
  // (PJRT's pinned_host/unpinned_host memory kinds: host offloading). The
  // CPU addresses it; memcpy copies to and from it as host memory.
  // host_mem_free waits for the device work enqueued so far (a copy may
  // still read it). Both NULL: the device's host memory space is its own
  // memory (the host device).
  iron_status_t (*host_mem_alloc)(iron_device_t *dev, size_t nbytes,
                                  void **out_ptr);
  void (*host_mem_free)(iron_device_t *dev, void *ptr);
  // Enqueues the `n` copies that `table` (device memory holding n
  // iron_copy_entry_t, each of at most `max_bytes`) describes as one launch,
  // ordered like other device work and recordable in a graph: the table is
  // read when the work runs, so a replay copies what it holds then.
  // n == 0 prepares (compiles the kernel; never while recording): OK when
  // batched copies are available. May be NULL; UNIMPLEMENTED when
  // unavailable (IRON_CUDA_COPY_BATCH=0, no compiler) or n is too large.
  iron_status_t (*copy_batch)(iron_device_t *dev, const void *table,
                              uint32_t n, uint64_t max_bytes);
  // Called at the end of every job, on the thread that ran it: returns once
  // the device work the job enqueued has completed, or with the device's
  // (sticky) asynchronous error.
  iron_status_t (*job_sync)(iron_device_t *dev);
  // The device's kernel for an op kind (NULL: none, the op is refused at
  // compile time). Kernels of such devices get tensors whose `data` are
  // device pointers, and ctx->dev.
  const iron_kernel_t *(*kernel_lookup)(iron_op_kind_t kind);
  // Called once after every kernel of a plan was prepared (e.g. compile the
  // plan's generated sources in one parallel batch). May be NULL.
  iron_status_t (*plan_finish)(iron_device_t *dev);
  // Human-readable device kind, e.g. "NVIDIA H200" (NULL: `kind`).
  const char *(*description)(const iron_device_t *dev);
  // Whether `op` can go into a generated fused kernel (src/compiler/fuse.h).
  // NULL: the device does not fuse. Fusions then reach kernel_lookup as
  // IRON_OP_FUSION ops. IRON_NO_FUSION=1 turns fusion off.
  bool (*fusable)(const iron_ir_op_t *op);
  // Whether a stablehlo.reduce may be part of a row fusion
  // (src/compiler/fuse_rows.h: the kernel that reads each row once for a
  // softmax or a norm). NULL: the device makes no row fusions. Asked only
  // when `fusable` is set and fusion is on.
  bool (*row_fusable)(const iron_ir_op_t *reduce);
  // Whether a stablehlo.transpose that `fusable` accepts may also pivot a
  // fusion: take a value the fusion computes (the members before it keep
  // the operand's shape, those after it the result's; src/compiler/fuse.h).
  // NULL: transposes only read their operand from memory. Asked only when
  // `fusable` is set and fusion is on.
  bool (*pivot_fusable)(const iron_ir_op_t *transpose);
  // Whether a stablehlo.dot_general with a vector side becomes
  // multiply + reduce before fusion (src/compiler/vector_dot.h), so that
  // the fusions read its matrix operand in place; `matrix` is that
  // operand's index. NULL: dots stay dots. Asked only when `fusable` is
  // set and fusion is on.
  bool (*vector_dot)(const iron_ir_op_t *op, uint32_t matrix);
  // A kernel that runs the whole stablehlo.while `op` on the device, with
  // no host round trip per iteration (CUDA: loops over scalars, in one GPU
  // thread), or NULL when the device cannot: the loop then runs as the
  // planner's WHILE step. Called at compile time. May be NULL.
  const iron_kernel_t *(*while_kernel)(const iron_ir_op_t *op);
  // Called on the thread that is about to run a job (the worker, or the
  // caller for inline jobs), e.g. to make the device's context current
  // there. Never fails (a device keeps its own error). May be NULL.
  void (*thread_enter)(iron_device_t *dev);

  // Graphs (CUDA graphs): record the device work that the calling thread
  // enqueues between graph_begin and graph_end (nothing runs meanwhile) and
  // replay it with graph_launch. All four are NULL on devices without
  // graphs. While recording, mem_alloc returns memory owned by the graph
  // (valid at every launch) and mem_free of such memory becomes part of the
  // graph; the recorded work must free all of it, must not read device
  // memory back to the host and must not wait for the device: on the
  // recording thread memcpy to or from the host, job_sync and graph entries
  // fail (FAILED_PRECONDITION, nothing enqueued) and spoil the recording.
  // Other threads' mem_alloc/mem_free/memcpy/job_sync wait until the
  // recording ends (their work must neither join the graph nor wait for a
  // stream that is being recorded). graph_begin waits for those already
  // under way. The device must not be in sync mode (IRON_SYNC=1 runs jobs
  // of several threads at once; the executor records nothing then).
  iron_status_t (*graph_begin)(iron_device_t *dev);
  // Ends the recording, always (the stream is usable again afterwards).
  // `keep` false (or any failure while recording, a spoiled recording, or
  // graph memory still allocated): the recording is discarded, *out_graph
  // is NULL and the status says why (OK when !keep). The device stays
  // usable either way, unless a sticky fault was seen.
  iron_status_t (*graph_end)(iron_device_t *dev, bool keep, void **out_graph);
  // Enqueues one replay of `graph` (ordered like any other device work).
  iron_status_t (*graph_launch)(iron_device_t *dev, void *graph);
  // Frees a graph (after the replays enqueued so far).
  void (*graph_destroy)(iron_device_t *dev, void *graph);
  // Gives the memory that destroyed graphs reserved back to the device
  // (CUDA keeps graph memory for later graphs until trimmed). May be NULL.
  void (*graph_trim)(iron_device_t *dev);
  // Device loops (CUDA: a WHILE conditional node): both NULL, or failing
  // with UNIMPLEMENTED, where the device or its driver has none.
  // graph_while_begin starts a recording as graph_begin does; graph_end then
  // returns a graph whose launch repeats the recorded work while the
  // predicate last set by graph_while_condition is true, at least once per
  // launch (the caller saw the first predicate true). While recording such
  // a body, mem_alloc hands out ordinary memory that the graph owns from
  // graph_end on (graph_destroy releases it after the launches), and
  // mem_free of it makes it available to later allocations of the same
  // recording (the body runs in order); graph_end discards a recording that
  // leaves some of it allocated.
  iron_status_t (*graph_while_begin)(iron_device_t *dev);
  // Records: the loop's predicate becomes the first byte of `pred` (device
  // memory holding a bool) at this point of the body.
  iron_status_t (*graph_while_condition)(iron_device_t *dev, const void *pred);
} iron_device_vtable_t;

#define IRON_DEVICE_RECENT_STEPS 4

// One step enqueued on a device (see iron_device_t.recent).
typedef struct iron_device_step_note {
  _Atomic(const iron_ir_op_t *) op;
  _Atomic(const char *) func;    // the function holding op (plan-owned)
  _Atomic(const char *) kernel;  // set by the device (static or device-owned)
} iron_device_step_note_t;

struct iron_device {
  const iron_device_vtable_t *vtable;
  iron_runtime_t *runtime;  // not retained (the runtime owns the device)
  int id;
  _Atomic int64_t bytes_in_use;
  // Allocation beyond this many bytes in use fails with RESOURCE_EXHAUSTED
  // (0: no limit). From IRON_HOST_MEMORY_LIMIT; tests set it directly.
  int64_t memory_limit;
  // Highest bytes_in_use seen (tests reset it to measure a run's peak).
  _Atomic int64_t peak_bytes_in_use;
  iron_threadpool_t *pool;  // kernels' thread pool (host)
  bool sync;                // IRON_SYNC=1: run jobs inline
  // Jobs run with denormals flushed to zero (base/fpenv.h), as XLA:CPU runs
  // its programs: the host device, unless IRON_HOST_DENORMALS=keep.
  bool flush_denormals;
  // FIFO job queue served by `worker`.
  pthread_mutex_t mu;
  pthread_cond_t cv;
  iron_job_t *head, *tail;
  bool shutdown;
  bool has_worker;
  bool destroy_on_exit;  // see iron_device_deinit_base
  bool worker_busy;      // the worker is running a job (guarded by mu)
  bool inline_busy;      // a caller runs a job inline (guarded by mu)
  // IRON_INLINE_SMALL (default on): small jobs run on the calling thread
  // when the device is idle, as XLA:CPU does; see iron_device_enqueue.
  bool inline_small;
  pthread_t worker;
  // Counted loops of at least this many iterations run their body as a
  // device graph (vtable->graph_*; 0: never). IRON_CUDA_GRAPHS on CUDA.
  int64_t graph_min_trips;
  // Data-dependent while loops run as device loops (vtable->graph_while_*;
  // CUDA: conditional nodes in the driver and IRON_CUDA_DEVICE_WHILE).
  bool graph_while;
  // Executables of at least this many kernel steps whose whole program a
  // graph can record run as one device graph replay per call once the
  // measured rule says it pays (src/runtime/exec_graph.c; 0: never).
  // IRON_CUDA_PROGRAM_GRAPHS on CUDA. With program_graph_force (an explicit
  // N >= 2) every such program is recorded, paying or not (measuring).
  int64_t program_graph_min_steps;
  bool program_graph_force;
  // A program graph reads an argument of at least this many bytes where
  // the caller's buffer is, instead of copying it into a home, when the
  // buffer was at the same address in the call before the recording and is
  // not donated; a replay then needs it at that address again (else the
  // call runs the ordinary way and the next recording copies it). 0:
  // never. IRON_CUDA_PROGRAM_GRAPH_BORROW on CUDA.
  int64_t program_graph_borrow_min;
  // The kernel steps (and loops replayed as graphs) the executor enqueued
  // last on this device: a ring of IRON_DEVICE_RECENT_STEPS, the most
  // recent at (recent_count - 1) % IRON_DEVICE_RECENT_STEPS. Written by the
  // thread running the job (iron_device_note_step, a few relaxed stores per
  // step); devices add the kernel they launched for it (`kernel`). A device
  // that runs work asynchronously names them when it sees a fault later
  // (op, source line, function, kernel); CUDA resets the count once its
  // work has finished (the ops may die with their executables after that).
  iron_device_step_note_t recent[IRON_DEVICE_RECENT_STEPS];
  _Atomic uint32_t recent_count;
};

// Initializes the base part (queue and worker thread).
iron_status_t iron_device_init_base(iron_device_t *dev,
                                    const iron_device_vtable_t *vtable,
                                    iron_runtime_t *rt, int id);
// Drains the queue, joins the worker. Returns false when called on the
// worker itself (the last reference dropped inside a job): then the worker
// finishes the queue and calls vtable->destroy again on its way out, and the
// caller must not free the device now.
bool iron_device_deinit_base(iron_device_t *dev);
// Queues `job` (or runs it inline when dev->sync). Thread-safe.
// `small` marks a job cheap enough (no loops, few bytes) that handing it to
// the worker thread would cost more than running it: when the device is idle
// (empty queue, worker not running a job) it runs on the calling thread,
// and the worker waits for it, so FIFO order holds. A measured trade-off
// (docs/decisions.md): ~8 us instead of ~22 us for a warm x*2+1.
void iron_device_enqueue(iron_device_t *dev, iron_job_t *job, bool small);
// True when called on dev's worker thread (or inline in sync mode).
bool iron_device_on_worker(const iron_device_t *dev);

// Records that the job on the calling thread is about to enqueue the work
// of `op` (in function `func`) on `dev` (iron_device_t.recent). Only the
// thread running dev's current job calls it.
static inline void iron_device_note_step(iron_device_t *dev,
                                         const iron_ir_op_t *op,
                                         const char *func) {
  uint32_t n = atomic_load_explicit(&dev->recent_count, memory_order_relaxed);
  iron_device_step_note_t *r = &dev->recent[n % IRON_DEVICE_RECENT_STEPS];
  atomic_store_explicit(&r->op, op, memory_order_relaxed);
  atomic_store_explicit(&r->func, func, memory_order_relaxed);
  atomic_store_explicit(&r->kernel, NULL, memory_order_relaxed);
  atomic_store_explicit(&dev->recent_count, n + 1, memory_order_release);
}

// Names the kernel the device launches for the step noted last.
static inline void iron_device_note_kernel(iron_device_t *dev,
                                           const char *kernel) {
  uint32_t n = atomic_load_explicit(&dev->recent_count, memory_order_relaxed);
  if (!n) return;
  atomic_store_explicit(&dev->recent[(n - 1) % IRON_DEVICE_RECENT_STEPS].kernel,
                        kernel, memory_order_relaxed);
}
// Bracket a host callback (Python code called from a running job). Work the
// callback submits to the device running that job (a jitted function on
// iron, a device_put) runs at once on the same thread, nested: the queue
// cannot advance until the callback returns, so queuing it would deadlock.
// Thread-local; calls nest.
void iron_device_host_callback_enter(void);
void iron_device_host_callback_leave(void);

// The host (CPU) device.
iron_status_t iron_host_device_create(iron_runtime_t *rt, int id,
                                      int num_threads,
                                      iron_device_t **out_device);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_DEVICE_H_
