// ironjax public C API: load a StableHLO portable artifact, make buffers, run
// it. No JAX needed. The PJRT plugin (src/pjrt) is written on top of this API
// and nothing else from the runtime.
//
// Ownership: objects are reference counted; *_create / *_compile return one
// reference owned by the caller; *_retain adds one; *_release drops one and
// frees at zero. Borrowed pointers (accessors) live as long as the object.
// Thread-safety: every function may be called from any thread; objects are
// internally synchronized.
// Errors: fallible functions return iron_status_t (NULL = OK; see
// iron/status.h); out-parameters are untouched on error.
#ifndef IRON_IRON_H_
#define IRON_IRON_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "iron/dtype.h"
#include "iron/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_runtime iron_runtime_t;
typedef struct iron_device iron_device_t;
typedef struct iron_buffer iron_buffer_t;
typedef struct iron_event iron_event_t;
typedef struct iron_executable iron_executable_t;

// ---------------------------------------------------------------------------
// Runtime and devices

typedef struct iron_runtime_options {
  int num_threads;  // host thread pool size; <= 0: IRON_NUM_THREADS or #CPUs
} iron_runtime_options_t;

// Creates the runtime with its devices: one CUDA device per GPU when CUDA is
// usable, else one host device; IRON_DEVICE=host or =cuda forces the kind
// (=cuda fails with FAILED_PRECONDITION saying why CUDA is not usable).
// `options` may be NULL.
iron_status_t iron_runtime_create(const iron_runtime_options_t *options,
                                  iron_runtime_t **out_runtime);
void iron_runtime_retain(iron_runtime_t *rt);
void iron_runtime_release(iron_runtime_t *rt);

int iron_runtime_device_count(const iron_runtime_t *rt);
// Borrowed; lives as long as the runtime.
iron_device_t *iron_runtime_device(const iron_runtime_t *rt, int index);

int iron_device_id(const iron_device_t *dev);
// "host" for the CPU device, "cuda" for a GPU.
const char *iron_device_kind(const iron_device_t *dev);
// Human-readable kind: "NVIDIA H200" for a GPU, else the same as
// iron_device_kind. Borrowed; lives as long as the device.
const char *iron_device_description(const iron_device_t *dev);
// Bytes currently allocated for buffers on the device (for memory stats).
int64_t iron_device_bytes_in_use(const iron_device_t *dev);
// Allocation statistics of a device (PJRT_Device_MemoryStats).
typedef struct iron_device_memory_stats {
  int64_t bytes_in_use;       // as iron_device_bytes_in_use
  int64_t peak_bytes_in_use;  // highest bytes_in_use since creation or reset
  int64_t bytes_limit;        // allocation limit (IRON_HOST_MEMORY_LIMIT); 0: none
} iron_device_memory_stats_t;
void iron_device_memory_stats(const iron_device_t *dev,
                              iron_device_memory_stats_t *out_stats);
// Restarts the peak at the current bytes in use.
void iron_device_reset_peak_memory(iron_device_t *dev);

// ---------------------------------------------------------------------------
// Events: complete once, with OK or an error.

void iron_event_retain(iron_event_t *ev);
void iron_event_release(iron_event_t *ev);
bool iron_event_is_ready(const iron_event_t *ev);
// Blocks until ready; returns a copy of the event's status (caller frees).
iron_status_t iron_event_wait(iron_event_t *ev);
// Copy of the status of a ready event (OK if not ready yet).
iron_status_t iron_event_status(iron_event_t *ev);
// Calls `fn(status, arg)` once when ready: immediately on the calling thread
// if it already is, else on the completing thread. The callback owns
// `status` (a copy) and must free it.
typedef void (*iron_event_callback_t)(iron_status_t status, void *arg);
void iron_event_on_ready(iron_event_t *ev, iron_event_callback_t fn,
                         void *arg);
// A user-completable event (for PJRT_Event_Create/Set) and its completion.
iron_status_t iron_event_create(iron_event_t **out_event);
// Consumes `status`. Completing twice is ignored after the first.
void iron_event_complete(iron_event_t *ev, iron_status_t status);

// ---------------------------------------------------------------------------
// Buffers: an immutable shaped array on a device.

// Where a buffer's bytes live. A device with its own memory (CUDA) also
// keeps buffers in page-locked host memory: PJRT's "pinned_host" and
// "unpinned_host" memory kinds, host offloading. Programs read and write
// only IRON_MEMORY_DEVICE buffers (execute refuses the others; the PJRT
// layer copies). On the host device both spaces are the same memory.
typedef enum iron_memory_space {
  IRON_MEMORY_DEVICE = 0,
  IRON_MEMORY_HOST = 1,
} iron_memory_space_t;
// Whether IRON_MEMORY_HOST is memory apart from the device's own.
bool iron_device_has_host_memory(const iron_device_t *dev);

// Copies `data` (with optional byte strides, which may be negative or zero;
// NULL means dense row-major) into a new buffer. The copy is complete when
// this returns.
iron_status_t iron_buffer_create_from_host(iron_device_t *dev,
                                           iron_dtype_t dtype, int32_t rank,
                                           const int64_t *dims,
                                           const void *data,
                                           const int64_t *byte_strides,
                                           iron_buffer_t **out_buffer);
// The same in a memory space of `dev`.
iron_status_t iron_buffer_create_from_host_in(
    iron_device_t *dev, iron_memory_space_t space, iron_dtype_t dtype,
    int32_t rank, const int64_t *dims, const void *data,
    const int64_t *byte_strides, iron_buffer_t **out_buffer);
void iron_buffer_retain(iron_buffer_t *buf);
void iron_buffer_release(iron_buffer_t *buf);

iron_device_t *iron_buffer_device(const iron_buffer_t *buf);
iron_dtype_t iron_buffer_dtype(const iron_buffer_t *buf);
int32_t iron_buffer_rank(const iron_buffer_t *buf);
const int64_t *iron_buffer_dims(const iron_buffer_t *buf);
size_t iron_buffer_size_in_bytes(const iron_buffer_t *buf);
iron_memory_space_t iron_buffer_memory_space(const iron_buffer_t *buf);
// Ready when the buffer's contents have been computed (or failed). Returns a
// new reference.
iron_event_t *iron_buffer_ready_event(iron_buffer_t *buf);
// Copies the contents to `dst` (dense row-major, `dst_size` must equal the
// byte size) once ready. *out_done (new reference) completes after the copy.
iron_status_t iron_buffer_to_host(iron_buffer_t *buf, void *dst,
                                  size_t dst_size, iron_event_t **out_done);
// Copies to another device (or the same one). Asynchronous like execute.
iron_status_t iron_buffer_copy_to_device(iron_buffer_t *buf,
                                         iron_device_t *dst_dev,
                                         iron_buffer_t **out_buffer);
// The same into a memory space of `dst_dev` (from any space). A copy to the
// same device and space shares the bytes (buffers are immutable).
iron_status_t iron_buffer_copy_to_memory(iron_buffer_t *buf,
                                         iron_device_t *dst_dev,
                                         iron_memory_space_t space,
                                         iron_buffer_t **out_buffer);
// Host address of the contents (host device only; NULL for devices with their
// own memory, and while not ready).
void *iron_buffer_host_pointer(iron_buffer_t *buf);
// Address of the contents in the memory of the buffer's device, once ready:
// the host address on the host device, the device pointer (CUdeviceptr) on
// a CUDA device, as XLA's PJRT clients report for UnsafeBufferPointer; NULL
// while not ready, after a failure, or for a donated buffer.
void *iron_buffer_device_pointer(iron_buffer_t *buf);

// ---------------------------------------------------------------------------
// Executables

typedef struct iron_compile_options {
  // Device the executable will run on (NULL: device 0).
  iron_device_t *device;
} iron_compile_options_t;

// Reads a StableHLO portable artifact (MLIR bytecode of VHLO), verifies and
// plans it. Errors name the op and its source line, e.g.
// "UNIMPLEMENTED: stablehlo.fft is not supported yet (f.py:12)".
iron_status_t iron_executable_compile(iron_runtime_t *rt, const void *bytes,
                                      size_t size,
                                      const iron_compile_options_t *options,
                                      iron_executable_t **out_executable);
void iron_executable_retain(iron_executable_t *exe);
void iron_executable_release(iron_executable_t *exe);

// Module name ("jit_f").
const char *iron_executable_name(const iron_executable_t *exe);
// A stable hex fingerprint of the artifact bytes.
const char *iron_executable_fingerprint(const iron_executable_t *exe);
uint32_t iron_executable_num_inputs(const iron_executable_t *exe);
uint32_t iron_executable_num_outputs(const iron_executable_t *exe);
// Static type of input/output i: dtype, rank and dims (borrowed).
void iron_executable_input_type(const iron_executable_t *exe, uint32_t i,
                                iron_dtype_t *out_dtype, int32_t *out_rank,
                                const int64_t **out_dims);
void iron_executable_output_type(const iron_executable_t *exe, uint32_t i,
                                 iron_dtype_t *out_dtype, int32_t *out_rank,
                                 const int64_t **out_dims);
// Whether input i may be donated (tf.aliasing_output or jax.buffer_donor),
// and the output it aliases (-1 if none).
bool iron_executable_input_donatable(const iron_executable_t *exe,
                                     uint32_t i);
int32_t iron_executable_input_alias(const iron_executable_t *exe, uint32_t i);
// The memory kind main's input/output i is annotated with (mhlo.memory_kind,
// e.g. "pinned_host"), or NULL when it has none (the device's own memory).
// Borrowed: lives as long as the executable.
const char *iron_executable_input_memory_kind(const iron_executable_t *exe,
                                             uint32_t i);
const char *iron_executable_output_memory_kind(const iron_executable_t *exe,
                                              uint32_t i);
// Whether the program calls back into the host process (jax callbacks:
// custom_call @iron_python_callback); such runs need the callback handler
// that ironjax installs.
bool iron_executable_has_host_callbacks(const iron_executable_t *exe);
// The program as readable text (iron IR); caller frees with free().
char *iron_executable_text(const iron_executable_t *exe);

// Runs the executable asynchronously on its device. `args` are borrowed (the
// run keeps its own references). `donate` (may be NULL) marks inputs whose
// contents the run may consume: the caller must not use such a buffer
// afterwards (the PJRT layer deletes it). Checks argument count, dtypes and
// shapes before anything runs and returns INVALID_ARGUMENT naming the
// argument. `out_results` receives num_outputs new buffers that become ready
// when the run finishes; *out_done (new reference, may be NULL to skip)
// completes then too, with the run's error if it failed (the results then
// carry that error too).
iron_status_t iron_executable_execute(iron_executable_t *exe,
                                      iron_buffer_t *const *args,
                                      uint32_t num_args, const bool *donate,
                                      iron_buffer_t **out_results,
                                      iron_event_t **out_done);

// ---------------------------------------------------------------------------
// Lent routines

// Registers a LAPACK/BLAS routine (Fortran calling convention, e.g. "dgesdd"
// from scipy.linalg.cython_lapack) that host kernels of jaxlib's LAPACK
// custom calls call at run time; nothing is linked at build time.
// INVALID_ARGUMENT when no kernel uses `name`. Thread-safe; a later registration
// of the same name replaces the earlier one.
iron_status_t iron_lapack_register(const char *name, void *fn);

#ifdef __cplusplus
}
#endif

#endif  // IRON_IRON_H_
