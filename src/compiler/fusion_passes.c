// The fusion passes in their order; see fusion_passes.h.
#include "compiler/fusion_passes.h"

#include <string.h>

#include "compiler/fuse_rows.h"
#include "compiler/merge_producers.h"
#include "compiler/merge_reduces.h"
#include "compiler/recompute.h"

iron_status_t iron_compiler_fusion_passes(iron_ir_module_t *m,
                                          const iron_fusion_predicates_t *p,
                                          iron_fusion_counts_t *out_counts) {
  iron_fusion_counts_t n;
  memset(&n, 0, sizeof(n));
  iron_status_t st = IRON_OK;
  if (p->vector_dot) st = iron_compiler_vector_dots(m, p->vector_dot, &n.dots);
  if (!st && p->row_fusable)
    st = iron_compiler_fuse_rows(m, p->fusable, p->row_fusable, &n.rows);
  if (!st && iron_compiler_recompute_on())
    st = iron_compiler_recompute(m, p->fusable, &n.copies);
  if (!st)
    st = iron_compiler_fuse_pivots(m, p->fusable, p->pivot_fusable,
                                   &n.fusions);
  if (!st && iron_compiler_merge_producers_on())
    st = iron_compiler_merge_producers(m, p->fusable, &n.producers);
  if (!st && iron_compiler_merge_reduces_on())
    st = iron_compiler_merge_reduces(m, p->fusable, &n.merged);
  if (out_counts) *out_counts = n;
  return st;
}
