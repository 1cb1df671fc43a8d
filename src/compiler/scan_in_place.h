// Scans that update stacked state in place: an IR pass run before fusion.
//
// jax's scan over stacked state (a KV cache of L layers, one layer per
// iteration) lowers to a counted while loop that carries the stacked input
// xs (passed through unchanged) and a stacked output ys (zeros at first,
// written at [i] by dynamic_update_slice). Iteration i reads xs[i], writes
// a few rows of it and stacks the result into ys[i]:
//
//   k1  = dynamic_slice(xs, i, 0, ...)        [-> reshape dropping the 1]
//   k2  = dynamic_update_slice(k1, u, s...)   (this token's keys)
//   ys' = dynamic_update_slice(ys, [1, ...]-reshape of k2, i, 0, ...)
//
// so every iteration copies its whole slab twice (xs[i] out, k2 into ys)
// to change a row. When the loop runs i = 0, 1, ..., L - 1 over the whole
// stacked dim (the slab index being i, or L - 1 - i for a reversed scan,
// the same for the read and the write) and nothing reads the loop's xs
// result, the final ys equals xs with each slab's rows written, and the
// pass rewrites the body to
//
//   xs' = dynamic_update_slice(xs, [1, ...]-reshape of u, i, s...)
//   k2  = [reshape of] dynamic_slice(xs', i, 0, ...)   (k2's other readers)
//
// returning xs' as the xs carry and ys unchanged; the loop's ys result's
// readers take its xs result instead. The row write then happens in the
// stacked array itself (in place when the loop holds the only reference,
// e.g. a donated cache: executor.c), and k2's readers (attention's dots)
// read the slab of xs' where it is (vector_dot.h, fusion). ys, now a
// carry that nobody reads, leaves the loop with its initial zeros.
#ifndef IRON_COMPILER_SCAN_IN_PLACE_H_
#define IRON_COMPILER_SCAN_IN_PLACE_H_

#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

// Rewrites every matching loop of every function of `module` in place
// (IRON_SCAN_IN_PLACE=0: none). *out_count (may be NULL) counts the (xs,
// ys) pairs rewritten. Fails only when out of memory.
iron_status_t iron_compiler_scan_in_place(iron_ir_module_t *module,
                                          int *out_count);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_SCAN_IN_PLACE_H_
