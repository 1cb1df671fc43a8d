// The executable plan: every reachable function and every op region of an IR
// module turned into flat lists of steps with slot indices, kernel params,
// output types and the values to free after each step (liveness, computed
// here once). The executor (src/runtime/executor.c) walks it without name
// lookups or IR allocation.
//
// Ownership: a plan borrows the module (which must outlive it) and owns its
// kernel params, constants and compiled regions. Immutable after
// iron_plan_create; concurrent executions are fine.
#ifndef IRON_COMPILER_PLAN_H_
#define IRON_COMPILER_PLAN_H_

#include "base/arena.h"
#include "device/device.h"
#include "device/kernel.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum iron_plan_step_kind {
  IRON_STEP_KERNEL,    // kernel->run(inputs -> fresh outputs)
  IRON_STEP_CONSTANT,  // output = the plan's immutable constant
  IRON_STEP_ALIAS,     // output i = input i reinterpreted (same byte size):
                       // reshape, bitcast, identities, sharding annotations
  IRON_STEP_WHILE,     // blocks[0] cond, blocks[1] body
  IRON_STEP_IF,        // blocks[0] true, blocks[1] false
  IRON_STEP_CASE,      // blocks[i] branch i; index clamped to the last
  IRON_STEP_CALL,      // callee (func.call, composite)
} iron_plan_step_kind_t;

typedef struct iron_plan_block iron_plan_block_t;
typedef struct iron_plan_func iron_plan_func_t;

typedef struct iron_plan_step {
  iron_plan_step_kind_t kind;
  const iron_ir_op_t *op;  // for error messages
  const char *func_name;   // enclosing function, for error messages
  uint32_t num_inputs, num_outputs, num_frees;
  const uint32_t *inputs;   // slots
  const uint32_t *outputs;  // slots
  const uint32_t *frees;    // slots released after the step
  // Output types (data NULL): dtype, rank, dims, count, nbytes.
  const iron_tensor_t *out_types;
  // KERNEL
  const iron_kernel_t *kernel;
  void *params;
  // Per output: the input it may be written into (dies here, equal byte
  // size, kernel inplace_ok), or -1. Checked again at run time (refcount).
  const int32_t *inplace;
  // CONSTANT: one storage per output (dev NULL, immutable).
  iron_storage_t *constant;
  // WHILE / IF / CASE
  uint32_t num_blocks;
  iron_plan_block_t *blocks;
  // CALL
  const iron_plan_func_t *callee;
  // WHILE: fail after this many iterations (0: no limit). From
  // IRON_MAX_WHILE_ITERATIONS at plan time, to find runaway loops.
  int64_t max_iterations;
  // WHILE, counted loop (jax's fori_loop/scan): the condition is
  // `carried[counter] < limit` with an integer counter that the body only
  // advances by a positive constant `step`. The executor then runs the body
  // ceil((limit - init) / step) times without evaluating the condition, so
  // a device never copies the predicate back per iteration. `init` is known
  // when the initial counter is a constant (counted_init_known), else read
  // once from the input.
  // The limit is a constant, or (counted_limit_index >= 0) a carried value
  // the body passes through unchanged (fori_loop with traced bounds), read
  // once from the input.
  bool counted;
  bool counted_init_known;
  uint32_t counted_index;
  int32_t counted_limit_index;
  int64_t counted_init, counted_limit, counted_step;
  // WHILE: per carried value, whether its input dies at this step, is
  // passed once and is not read by the regions directly (StableHLO regions
  // may read the enclosing scope): the executor then moves it into the
  // loop instead of sharing it, so that the body may update it in place
  // from iteration 0 on. NULL: none.
  const bool *carry_moves;
  // WHILE, data-dependent: set by the executor once the loop has run
  // (its kernels' first-use set-up is done), after which a device loop is
  // recorded from iteration 0 on instead of from iteration 1 (runtime
  // state, written by whichever execution gets there first).
  _Atomic bool device_loop_warm;
} iron_plan_step_t;

struct iron_plan_block {
  uint32_t num_args;
  const uint32_t *args;  // slots of the block arguments
  uint32_t num_entry_frees;
  const uint32_t *entry_frees;  // arguments nobody uses
  uint32_t num_steps;
  iron_plan_step_t *steps;
  uint32_t num_results;
  const uint32_t *results;  // slots of the terminator's operands
  uint32_t num_exit_frees;
  const uint32_t *exit_frees;  // released after the results are taken
};

struct iron_plan_func {
  const iron_ir_func_t *ir;
  uint32_t num_slots;
  iron_plan_block_t body;
  int state;  // 0 not planned, 1 in progress, 2 done
};

// A kernel op's region as planned: the public part kernels see first, then
// what the executor needs to run it (its own slot space and frame).
typedef struct iron_plan_region {
  iron_region_t base;  // first member: kernels get &region->base
  iron_plan_block_t block;
  uint32_t num_slots;
  // Values of the enclosing frame the region uses (regions of kernel ops are
  // not isolated: the artifact may hoist constants out of them). At each
  // call, slot captures[2k+1] of the region frame borrows slot captures[2k]
  // of the frame that runs the op.
  uint32_t num_captures;
  uint32_t *captures;
} iron_plan_region_t;

static inline const iron_plan_region_t *iron_plan_region_of(
    const iron_region_t *region) {
  return (const iron_plan_region_t *)region;
}

typedef struct iron_plan_owned iron_plan_owned_t;

typedef struct iron_plan {
  iron_arena_t arena;
  const iron_ir_module_t *module;
  iron_plan_func_t *funcs;  // parallel to module->funcs
  const iron_plan_func_t *main;
  iron_plan_owned_t *owned;  // params and constants to free
  // The device the plan's kernels and constants are for; NULL: the host
  // (also for devices that use host memory and host kernels).
  iron_device_t *dev;
  // The device the plan was created for, whatever its kind (NULL when none
  // was given): host-memory constants count against its memory limit when
  // host memory is its memory (the host device).
  iron_device_t *memory_dev;
  // Some reachable step runs a host callback (custom_call
  // @iron_python_callback): the PJRT layer then runs the program
  // synchronously, as XLA:CPU does (see src/device/host/callback.h).
  bool has_host_callbacks;
} iron_plan_t;

// Plans `module` starting at its main function. Errors name the op, its
// source line and the function, e.g. "UNIMPLEMENTED: stablehlo.fft is not
// supported yet (f.py:12) in function main".
iron_status_t iron_plan_create(const iron_ir_module_t *module,
                               iron_plan_t **out_plan);
// The same for device `dev` (NULL: host): kernels from
// dev->vtable->kernel_lookup, constants uploaded with dev->vtable->memcpy,
// dev->vtable->plan_finish called at the end. Regions of kernel ops are
// always planned with the reference (host) kernels
// (iron_reference_kernel_lookup).
iron_status_t iron_plan_create_on(const iron_ir_module_t *module,
                                  iron_device_t *dev, iron_plan_t **out_plan);
void iron_plan_destroy(iron_plan_t *plan);

// Test hook: replaces iron_host_kernel_lookup for plans created afterwards
// (NULL restores it). Lets runtime tests run before/without real kernels.
typedef const iron_kernel_t *(*iron_plan_kernel_lookup_fn_t)(
    iron_op_kind_t kind);
void iron_plan_set_kernel_lookup_for_testing(iron_plan_kernel_lookup_fn_t fn);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_PLAN_H_
