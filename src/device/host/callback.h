// Host callbacks: the custom_call target "iron_python_callback" through which
// jax.debug.print, jax.debug.callback, jax.pure_callback and
// jax.experimental.io_callback run Python code in the middle of a program.
//
// jax_plugins.iron lowers every callback primitive for the iron platform to
//   stablehlo.custom_call @iron_python_callback(token?, operands...)
//       {backend_config = "<callback id>", has_side_effect = ...}
// where the id names a Python callable in ironjax.callback's registry. At
// initialisation ironjax hands the plugin one C function pointer (the
// handler, a ctypes CFUNCTYPE) through iron_host_callback_set_handler, the
// one symbol the plugin exports besides GetPjrtApi. The kernel calls it
// with the operand buffers (host memory) and the result buffers to fill.
//
// Ordering: the kernel runs where the program runs (the device's FIFO worker
// thread, or the caller's thread for small inline jobs), in program order;
// ordered effects additionally thread tokens, which are zero-byte values
// here and are not passed to the handler.
#ifndef IRON_DEVICE_HOST_CALLBACK_H_
#define IRON_DEVICE_HOST_CALLBACK_H_

#include <stdint.h>

#include "device/host/host_kernel.h"

#ifdef __cplusplus
extern "C" {
#endif

// The custom_call target name that the Python lowering emits.
#define IRON_HOST_CALLBACK_TARGET "iron_python_callback"

// The handler ironjax installs. Called once per executed callback op, from
// the thread running the program (it takes the GIL itself: ctypes does).
//   callback_id: the id in the op's backend_config;
//   inputs/input_nbytes: the op's non-token operands in order (dense
//     row-major host memory, read-only, valid for the call only);
//   outputs/output_nbytes: the op's non-token results, allocated with the
//     result types' byte sizes; the handler fills every byte;
//   error/error_capacity: on failure the handler writes a NUL-terminated
//     message (truncated to fit) and returns non-zero.
// Returns 0 on success.
typedef int32_t (*iron_host_callback_handler_t)(
    uint64_t callback_id, int32_t num_inputs, void *const *inputs,
    const uint64_t *input_nbytes, int32_t num_outputs, void *const *outputs,
    const uint64_t *output_nbytes, char *error, uint64_t error_capacity);

// Installs (or with NULL removes) the process-wide handler. Exported from the
// plugin library (default visibility) so that ironjax can call it through
// ctypes; thread-safe (an atomic store; a callback already running keeps
// the handler it started with).
__attribute__((visibility("default"))) void iron_host_callback_set_handler(
    iron_host_callback_handler_t handler);

// How many compiled callback ops (kernels prepared and not yet destroyed)
// name callback `callback_id`. A compiled op lives as long as its
// executable, and an executable as long as runs of it are queued, so
// ironjax keeps a callable registered while this is nonzero even after the
// jit object that registered it is gone (with IRON_HOST_CALLBACK_SYNC=0 a
// run may still be queued then). Exported like the setter; thread-safe;
// calls nothing back (no GIL needed).
__attribute__((visibility("default"))) int32_t iron_host_callback_pins(
    uint64_t callback_id);

// The kernel for custom_call target `target` if it is a host-callback
// target, else NULL. This is the hook for custom_call dispatch.
const iron_kernel_t *iron_host_callback_kernel_for_target(
    const char *target);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_HOST_CALLBACK_H_
