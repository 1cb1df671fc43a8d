// Counted while loops: jax's fori_loop and scan lower to a while whose
// condition is `carried[counter] < limit` and whose body advances the
// counter by a positive constant. The planner runs such loops a known
// number of times without evaluating the condition (plan.h, counted); the
// scan-in-place pass (scan_in_place.h) reasons about which slab each
// iteration touches. One recognizer serves both.
#ifndef IRON_COMPILER_COUNTED_LOOP_H_
#define IRON_COMPILER_COUNTED_LOOP_H_

#include <stdbool.h>
#include <stdint.h>

#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_counted_loop {
  uint32_t counter;     // index of the counter among the carried values
  int64_t step;         // > 0
  int64_t limit;        // when limit_index < 0
  int32_t limit_index;  // >= 0: a carried value the body passes through
  bool init_known;      // the counter's initial value is a constant
  int64_t init;
} iron_counted_loop_t;

// Whether `op` (a stablehlo.while) is a counted loop: the condition holds
// only constants and one signed `counter < limit` compare of an s32/s64
// carried counter, and the body returns counter + constant step (> 0).
bool iron_counted_loop(const iron_ir_op_t *op, iron_counted_loop_t *out);

// The value of a one-element s32/s64 constant.
bool iron_ir_const_int(const iron_ir_value_t *v, int64_t *out);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_COUNTED_LOOP_H_
