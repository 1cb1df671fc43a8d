// stablehlo.rng_bit_generator: algorithm, state and output read and
// validated once for every device (host rng.c, CUDA cuda_rng.c), so that
// the devices accept and refuse the same programs with the same statuses
// and messages. Both expand the state bit-exactly as XLA:CPU does (host
// rng.c documents the layout of keys, counters and words).
#ifndef IRON_DEVICE_PLANS_RNG_PLAN_H_
#define IRON_DEVICE_PLANS_RNG_PLAN_H_

#include <stdint.h>

#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_rng_plan {
  const iron_ir_type_t *out;  // result 1 (the bits), borrowed from the op
  int32_t algorithm;          // IRON_RNG_THREE_FRY or IRON_RNG_PHILOX
  int32_t state_words;        // u64 words of the state: 2, or 3 with PHILOX
  int32_t out_bytes;          // bytes per output element: 1, 2, 4 or 8
  int64_t count;              // output elements
} iron_rng_plan_t;

// Validates a stablehlo.rng_bit_generator and fills *out (zeroed first):
// 1 operand and 2 results (INVALID_ARGUMENT), static tensor types,
// rng_algorithm (DEFAULT is PHILOX, as on XLA:CPU; others UNIMPLEMENTED), a
// u64[2] state (u64[3] with PHILOX; UNIMPLEMENTED otherwise), an output
// state of the state's type (INVALID_ARGUMENT), an integer or float output
// dtype of 8, 16, 32 or 64 bits stored densely (UNIMPLEMENTED), an output
// count that fits int64 (INVALID_ARGUMENT).
iron_status_t iron_rng_plan_read(const iron_ir_op_t *op, iron_rng_plan_t *out);

// XLA's SplitShapeIntoHalves for THREE_FRY outputs of at most 32 bits: the
// first even dim, else the first largest one (a scalar counts as shape
// [1]), as out = [outer, split, inner]; the two halves of the split dim
// take the two words of one block.
void iron_rng_plan_threefry_split(int32_t rank, const int64_t *dims,
                                  int64_t *out_outer, int64_t *out_split,
                                  int64_t *out_inner);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_PLANS_RNG_PLAN_H_
