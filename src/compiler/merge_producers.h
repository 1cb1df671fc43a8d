// Element-wise producer kernels merged into the kernels that read them
// (issue 14; XLA's FusionMerger). After fusion (fuse.h), a value that
// several kernels read is written by its own kernel and read back by each:
// batch norm's ReLU gradient `select(y*s+b > 0, g, 0)` is read by the
// backward sums and by the input gradient. The recompute pass (recompute.h)
// does not copy it before fusion because its leaves (y and g) take twice
// its bytes; but both consumers read y anyway, so computing it in each of
// them reads g instead of the value: no more bytes, and its own kernel
// (two arrays read, one written) disappears. Only after fusion are the
// kernels' operands known, so this pass decides there.
//
// A producer P is merged into its consumers when all of:
// - P is an iron.fusion whose largest result takes at least
//   iron_recompute_min_bytes() (1 MiB) and whose region holds at most
//   IRON_RECOMPUTE_MAX_OPS ops, each cheap (iron_recompute_cheap_kind) or
//   a constant;
// - every use of P's results is by a consumer kernel of P's block: an
//   iron.fusion of element-wise members that may end in one reduce
//   (fuse.c's plain and reduce fusions: no transposes, slices or dynamic
//   updates, one reduce at most, just before the return), or a reduce of
//   its own that `can_fuse` accepts; inside a fusion every use of a result's
//   argument is an element-wise member of its dims or a reduced operand of its
//   dims, and no result is returned as is;
// - the plan moves no more bytes: the consumers' reads of P's operands
//   that they do not read already take no more bytes than P's kernel
//   moves (its operands and results) plus the consumers' reads of its
//   results (a value computed from y and g, read by two kernels that read
//   y: before, 2+1+1+1 arrays; after, 1+1);
// - each merged kernel has at most IRON_FUSE_MAX_OPERANDS operands plus
//   results.
// A broadcast of its own that spreads a smaller value (the row pass leaves
// one where a norm's row values are spread for another row fusion, or
// fuse.c where a row fusion reads it) is such a producer too, merged as a
// fusion of itself; its consumers may also be row fusions (several
// reduces) when it spreads a row value over their rows or one element,
// which they compute as a member (fuse_rows.h's roles).
// Each consumer becomes a fusion computing P's members, then its own, its
// arguments for P's results replaced by P's members; it keeps its place,
// results and location. P is removed. Merging sweeps the block until
// nothing changes. The sibling-reduce pass (merge_reduces.h) runs after
// it: consumers that now read the same arrays merge there.
#ifndef IRON_COMPILER_MERGE_PRODUCERS_H_
#define IRON_COMPILER_MERGE_PRODUCERS_H_

#include <stdbool.h>

#include "base/status.h"
#include "compiler/fuse.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Merges producers as described above in every block of every function of
// `m` (function bodies and the regions of control flow that the device
// does not generate whole, as fuse.c). *out_merged (may be NULL) counts
// the producers merged.
iron_status_t iron_compiler_merge_producers(iron_ir_module_t *m,
                                            iron_fuse_predicate_t can_fuse,
                                            int *out_merged);

// false when IRON_FUSE_MERGE_PRODUCERS=0 (compile time): callers skip the
// pass.
bool iron_compiler_merge_producers_on(void);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_MERGE_PRODUCERS_H_
