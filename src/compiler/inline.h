// Call inlining: an IR pass run before fusion on devices that fuse. jax
// wraps small pieces of a program in private functions (each scan residual's
// dynamic_update_slice, x[i] as dynamic_index_in_dim, the scan body as
// closed_call); a func.call is a boundary that fusion cannot cross, and on
// the CUDA device each call's kernels run apart. Inlining private callees
// into their callers (loop bodies included) lets the fusion pass see the
// whole chain.
#ifndef IRON_COMPILER_INLINE_H_
#define IRON_COMPILER_INLINE_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Callees up to this many ops are inlined by the executable's compile.
#define IRON_INLINE_MAX_OPS 512

// Rewrites every function of `module` in place: each func.call of a private
// function whose body (nested regions included) has at most `max_ops` ops is
// replaced by a copy of that body, its arguments by the call's operands and
// the call's results by the values the body returns. Calls inside the copies
// are inlined in turn, up to a nesting depth of 8 (recursion is left as a
// call). Functions that are no longer called stay in the module (the
// planner plans only what main reaches). *out_num_inlined (may be NULL)
// counts the calls replaced. Fails only when out of memory.
iron_status_t iron_compiler_inline_calls(iron_ir_module_t *module,
                                         uint32_t max_ops,
                                         int *out_num_inlined);

// The compile step's policy: inlines (IRON_INLINE_MAX_OPS) when the module
// is about to be fused (`fusing`), unless IRON_INLINE_CALLS=0; always with
// IRON_INLINE_CALLS=all (a test switch: test_inline runs the corpus both
// ways on the host).
iron_status_t iron_compiler_inline_for_compile(iron_ir_module_t *module,
                                               bool fusing);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_INLINE_H_
