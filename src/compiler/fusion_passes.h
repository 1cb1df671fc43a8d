// The fusion passes of a device that generates its kernels, in their order
// (docs/ARCHITECTURE.md, "src/compiler"): the one list that compiling
// (runtime/executable.c) and `iron-dump --fuse-cuda` run.
//   1. dots with a vector side as reductions (vector_dot.h)
//   2. row fusions (fuse_rows.h): before element-wise fusion, which would
//      split a reduce from the element-wise work on both sides of it
//   3. cheap shared values copied per consumer (recompute.h;
//      IRON_FUSE_RECOMPUTE=0 skips it)
//   4. element-wise fusion with pivot transposes (fuse.h)
//   5. element-wise producer kernels merged into the kernels reading them
//      (merge_producers.h; IRON_FUSE_MERGE_PRODUCERS=0 skips it)
//   6. sibling reduce fusions merged (merge_reduces.h;
//      IRON_FUSE_SIBLING_REDUCES=0 skips it)
#ifndef IRON_COMPILER_FUSION_PASSES_H_
#define IRON_COMPILER_FUSION_PASSES_H_

#include "base/status.h"
#include "compiler/fuse.h"
#include "compiler/vector_dot.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// A device's predicates (its vtable's): `fusable` is required; a NULL
// other one skips its pass (no row fusions, no pivots, dots stay dots).
typedef struct iron_fusion_predicates {
  iron_fuse_predicate_t fusable;
  iron_fuse_predicate_t row_fusable;
  iron_fuse_predicate_t pivot_fusable;
  iron_vector_dot_predicate_t vector_dot;
} iron_fusion_predicates_t;

// What the passes did.
typedef struct iron_fusion_counts {
  int dots;      // dots rewritten as reductions
  int rows;      // row fusions
  int copies;    // shared values' expressions copied
  int fusions;   // element-wise (and reduce) fusions
  int producers; // producer kernels merged into their consumers
  int merged;    // sibling reduce merges
} iron_fusion_counts_t;

// Runs the passes on `m` in place; *out_counts (may be NULL) is zeroed
// first.
iron_status_t iron_compiler_fusion_passes(iron_ir_module_t *m,
                                          const iron_fusion_predicates_t *p,
                                          iron_fusion_counts_t *out_counts);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_FUSION_PASSES_H_
