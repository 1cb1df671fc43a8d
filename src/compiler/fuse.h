// Element-wise fusion (ARCHITECTURE decision 9): groups chains of
// element-wise ops (and the broadcasts/converts feeding them) of one shape
// into `iron.fusion` ops, whose region holds the group and returns the
// values used outside it. A device that generates code (CUDA) turns each
// fusion into one kernel; the host never sees fusions.
#ifndef IRON_COMPILER_FUSE_H_
#define IRON_COMPILER_FUSE_H_

#include <stdbool.h>

#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Whether the device can generate `op` inside a fused kernel. For a
// control-flow op (while, if, case): whether the device generates the op
// whole as one kernel, so that its regions are left unfused.
typedef bool (*iron_fuse_predicate_t)(const iron_ir_op_t *op);

// Rewrites every function of `m` in place (new ops, values and regions come
// from the module's arena): in each block (function bodies and the regions
// of while/if/case, not the regions of kernel ops), maximal groups of ops
// that `can_fuse` accepts, that produce the same shape and feed each other,
// become one iron.fusion placed where the group's last op was. A group grows
// only while none of its values has been used by an op outside it, so the
// move never reorders a use before its definition. A stablehlo.reduce that
// `can_fuse` accepts ends the group computing its reduced operands when
// nothing else of the group is used outside and its inits come from
// outside; the fusion then returns all of the reduce's results. Groups of
// one op stay as they are. *out_num_fusions (may be NULL) counts the
// fusions made.
iron_status_t iron_compiler_fuse(iron_ir_module_t *m,
                                 iron_fuse_predicate_t can_fuse,
                                 int *out_num_fusions);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_FUSE_H_
