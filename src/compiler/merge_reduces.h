// Sibling reduce fusions merged into one kernel (issue 14). Batch norm's
// backward pass sums four products of the same two arrays over the same
// dims (the bias, scale and mean gradients); after element-wise fusion
// (fuse.h) each is a reduce fusion of its own, and each reads the arrays
// again. XLA fuses such siblings into one multi-output reduction. This
// pass, run after fusion, merges two reduce fusions into one whose reduce
// is variadic (its body computes both bodies side by side), so one kernel
// reads the shared inputs once and writes both results.
//
// Two reduce kernels merge when each is an iron.fusion whose region
// computes element-wise members and ends in one stablehlo.reduce whose
// results it returns (fuse.c's reduce fusions) or a stablehlo.reduce of its
// own, they read a common operand of the reduces' input size (what the
// merge saves), both reduces have operands of the same dims and the same
// `dimensions` with the innermost dim kept (column and middle-axis
// reduces: each thread folds its own outputs, whatever the body), the
// merged reduce has at most
// IRON_MERGE_REDUCES_MAX_RESULTS results and `can_fuse` accepts it, and
// they can meet: the later one does not use the earlier one's results
// (directly or through ops between them) and no op between them uses the
// earlier one's results (the merged fusion takes the later one's place),
// or else the later one's operands are all defined before the earlier one
// (it takes the earlier one's place). The merged fusion's operands are
// the union of both; its results the earlier fusion's then the later
// one's. Merging repeats, so several siblings become one fusion.
#ifndef IRON_COMPILER_MERGE_REDUCES_H_
#define IRON_COMPILER_MERGE_REDUCES_H_

#include <stdbool.h>

#include "base/status.h"
#include "compiler/fuse.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IRON_MERGE_REDUCES_MAX_RESULTS 8

// Merges sibling reduce fusions in every block of every function of `m`
// (function bodies and the regions of control flow that the device does
// not generate whole, as fuse.c). *out_merged (may be NULL)
// counts the merges.
iron_status_t iron_compiler_merge_reduces(iron_ir_module_t *m,
                                          iron_fuse_predicate_t can_fuse,
                                          int *out_merged);

// false when IRON_FUSE_SIBLING_REDUCES=0 (compile time): callers skip the
// pass.
bool iron_compiler_merge_reduces_on(void);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_MERGE_REDUCES_H_
