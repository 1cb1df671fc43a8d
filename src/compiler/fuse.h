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

// A fusion has at most this many operands plus results: one CUDA kernel
// launch passes each as an 8-byte pointer parameter, and 4 KB of
// parameters is what every CUDA driver and NVRTC accept (CUDA 12.1+ allow
// 32 KB on Volta and newer; docs/decisions.md). fuse.c keeps groups within
// it by a bound (each member's results and its operands from outside the
// group when it joined), so a group that would pass it is split.
#define IRON_FUSE_MAX_OPERANDS 512

// Whether the device can generate `op` inside a fused kernel. For a
// control-flow op (while, if, case): whether the device generates the op
// whole as one kernel, so that its regions are left unfused.
typedef bool (*iron_fuse_predicate_t)(const iron_ir_op_t *op);

// Whether the fusion passes (this one, fuse_rows.h, recompute.h,
// merge_producers.h, merge_reduces.h) rewrite the blocks of op's regions: those of a while,
// if or case, unless `can_fuse` accepts the op (the device generates the
// loop or branch whole and keeps its ops unfused). Kernel ops' regions
// (reduce bodies, comparators, fusions) never.
bool iron_fuse_enters_regions(const iron_ir_op_t *op,
                              iron_fuse_predicate_t can_fuse);

// Calls fn(arg, b) on every block b nested in `blk` that the fusion passes
// rewrite (iron_fuse_enters_regions), inner blocks first, then on `blk`;
// stops at the first error.
typedef iron_status_t (*iron_fuse_block_fn_t)(void *arg, iron_ir_block_t *b);
iron_status_t iron_fuse_walk_blocks(iron_ir_block_t *blk,
                                    iron_fuse_predicate_t can_fuse,
                                    iron_fuse_block_fn_t fn, void *arg);

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
// one op stay as they are; no fusion has more than IRON_FUSE_MAX_OPERANDS
// operands plus results. *out_num_fusions (may be NULL) counts the
// fusions made.
iron_status_t iron_compiler_fuse(iron_ir_module_t *m,
                                 iron_fuse_predicate_t can_fuse,
                                 int *out_num_fusions);

// iron_compiler_fuse, where moreover a stablehlo.transpose that `can_fuse`
// and `can_pivot` (may be NULL: none) accept and whose operand a group
// computes pivots that group: it joins it and the group takes the
// transpose's shape, so the consumers of the transposed value join too.
// Members before the pivot have its operand's shape (the device computes
// them at the operand's coordinates), members after it the result's. A
// group pivots only when it has no reduce or dynamic_update_slice root;
// groups merge only when their pivots transpose one operand shape by one
// permutation, at most 4 pivots per group. A transpose never joins a group
// as an element-wise member (a square one has its operand's shape): it
// pivots, or starts a group reading its operand from memory.
iron_status_t iron_compiler_fuse_pivots(iron_ir_module_t *m,
                                        iron_fuse_predicate_t can_fuse,
                                        iron_fuse_predicate_t can_pivot,
                                        int *out_num_fusions);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_FUSE_H_
