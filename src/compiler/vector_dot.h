// Dots with a vector side as fused reductions. A stablehlo.dot_general one
// of whose operands has no free dim larger than 1 (a vector per batch:
// x @ W of a decode step, q . k over a KV cache) does two flops per
// element of the other operand: it is memory-bound. Written as
// multiply(broadcast(vector), matrix) then reduce(add) over the contracting
// dims, the fusion pass (fuse.h) fuses the matrix's producers into the
// reduce kernel: a dynamic_slice of one layer's weights out of a scan's
// stacked weights is read in place instead of copied for a library GEMV
// (three passes over the weights become one). A device asks for it per
// dot (the CUDA device: IRON_CUDA_VECTOR_DOTS).
#ifndef IRON_COMPILER_VECTOR_DOT_H_
#define IRON_COMPILER_VECTOR_DOT_H_

#include <stdbool.h>

#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Whether the device wants dot `op` rewritten; `matrix` is the index (0 or
// 1) of its operand that is not the vector.
typedef bool (*iron_vector_dot_predicate_t)(const iron_ir_op_t *op,
                                            uint32_t matrix);

// Rewrites, in every block of every function of `m` (regions of kernel ops
// aside), each float dot_general (f16, bf16, f32, f64 operands and result,
// no `algorithm` attribute) with a vector side that `want` accepts, into
//   convert -> transpose -> reshape -> broadcast_in_dim   (the vector)
//   convert                                               (the matrix)
//   multiply -> reduce(add, 0) -> transpose -> reshape -> convert
// in place of the dot, in f32 (f64 when an operand or the result is f64;
// f16/bf16 are converted in and the sum rounded once at the end, as
// XLA's dots accumulate). Steps that would change nothing are left out.
// The new ops carry the dot's location. *out_count (may be NULL) counts
// the dots rewritten.
iron_status_t iron_compiler_vector_dots(iron_ir_module_t *m,
                                        iron_vector_dot_predicate_t want,
                                        int *out_count);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_VECTOR_DOT_H_
