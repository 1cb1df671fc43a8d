// The sort comparators every device recognizes (host sort.c, CUDA
// cuda_sort_program.c), so both devices take their fast paths for the same
// programs and give exactly the permutation the comparator region defines.
//
// Recognized: the lexicographic comparators jax emits (jnp.sort / argsort /
// lax.sort with num_keys >= 1, complex keys as (real, imag)),
//   or(cmp_0(a0, b0), and(eq_0(a0, b0), or(cmp_1(..), and(eq_1, ...))))
// where cmp is LT or GT and each key ak/bk is an argument, its real/imag
// part, and optionally jax's canonicalisation chain
//   select(x != x, NaN, select(x == 0, 0, x)).
// Each key compares with exactly the semantics of its compare op: FLOAT
// (IEEE <, ==: KEY_F64), TOTALORDER (-NaN < -inf < ... < -0 < +0 < ... <
// inf < NaN: KEY_S64 on the sign-magnitude bits), SIGNED (KEY_S64),
// UNSIGNED (KEY_U64).
#ifndef IRON_DEVICE_PLANS_SORT_KEYS_H_
#define IRON_DEVICE_PLANS_SORT_KEYS_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IRON_SORT_MAX_KEYS 16
#define IRON_SORT_MAX_CANON 4

typedef enum iron_sort_key_mode {
  IRON_SORT_KEY_S64,  // signed integer order (TOTALORDER floats too)
  IRON_SORT_KEY_U64,  // unsigned integer order (unsigned ints, pred)
  IRON_SORT_KEY_F64,  // IEEE float compare (FLOAT): not a total order
} iron_sort_key_mode_t;

// One step of a canonicalisation chain: when the test holds, the value is
// replaced by the constant's bits. Steps are tried outermost first.
typedef struct iron_sort_canon_step {
  bool is_nan_test;  // x != x; else x == eq_value (FLOAT compare)
  double eq_value;
  uint64_t repl_bits;
} iron_sort_canon_step_t;

typedef struct iron_sort_key {
  int32_t operand;     // which sort operand
  int32_t part;        // 0 whole value, 1 real part, 2 imag part
  iron_dtype_t dtype;  // dtype of the compared scalar (the part's dtype)
  size_t elem_size;    // bytes of one operand element
  iron_sort_key_mode_t mode;
  bool descending;  // GT, or LT with the operands swapped
  bool is_float;
  int32_t nbits;     // 8 * bytes of the compared scalar
  size_t part_size;  // bytes of the compared scalar
  int32_t num_canon;
  iron_sort_canon_step_t canon[IRON_SORT_MAX_CANON];
  // The canonicalisation's `x == 0` sees denormals (of the f32/f64 compute
  // type) as zero, as XLA:CPU's compare does with denormals flushed. Not
  // set by iron_sort_keys_match: each device sets it from its own switch.
  bool daz;
} iron_sort_key_t;

typedef struct iron_sort_keys {
  int32_t num_keys;
  iron_sort_key_t keys[IRON_SORT_MAX_KEYS];
} iron_sort_keys_t;

// Matches the comparator region of stablehlo.sort `op` (operand types
// already validated: same rank and dims, known element sizes). True with
// the keys in lexicographic order (most significant first) when it is a
// recognized form; false otherwise (*out is then unspecified).
// The comparator's signature (StableHLO sort C5): one block whose 2n
// arguments are rank-0 tensors of the n operands' element types, pairwise.
// INVALID_ARGUMENT otherwise (every device reads each element through it).
iron_status_t iron_sort_check_comparator(const iron_ir_op_t *op);

bool iron_sort_keys_match(const iron_ir_op_t *op, iron_sort_keys_t *out);

// True when every key orders as an integer (all but KEY_F64), so a radix
// sort of order-preserving bit transforms gives the comparator's order.
bool iron_sort_keys_integer_ordered(const iron_sort_keys_t *keys);

// The value a constant's bits denote in a float key dtype (f16, bf16, f32,
// f64), as a double (exact).
double iron_sort_bits_to_double(uint64_t bits, iron_dtype_t dtype);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_PLANS_SORT_KEYS_H_
