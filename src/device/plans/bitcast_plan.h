// stablehlo.bitcast_convert: the dtype pair and sizes read and validated
// once for every device (host convert.c, CUDA cuda_elementwise.c), so that
// the devices accept and refuse the same programs with the same statuses
// and messages. Every dtype of 8 bits or more is stored densely and
// little-endian on both devices, so such a bitcast is a byte copy; a
// sub-byte side (one element per byte, in the low bits) makes both sides a
// little-endian bit stream (element 0 in the lowest bits, as XLA:CPU) in
// units of an element of the sub-byte dtype or a byte of the dense one.
#ifndef IRON_DEVICE_PLANS_BITCAST_PLAN_H_
#define IRON_DEVICE_PLANS_BITCAST_PLAN_H_

#include <stdbool.h>

#include "base/dtype.h"
#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_bitcast_plan {
  const iron_ir_type_t *in, *out;  // borrowed from the op
  // A sub-byte side: repacked as bit streams of in_unit / out_unit bits per
  // unit (1, 2, 4 or 8). Otherwise a byte copy.
  bool sub;
  int in_unit, out_unit;
} iron_bitcast_plan_t;

// Validates a stablehlo.bitcast_convert and fills *out (zeroed first): 1
// operand and 1 result, tensors (INVALID_ARGUMENT); dtypes of another
// width than 8 * their storage bytes (sub-byte ints and floats) only with a
// dense or sub-byte partner, never pred (UNIMPLEMENTED "for dtype a -> b"),
// static shapes for them (UNIMPLEMENTED) and as many bits in as out; dense
// pairs as many bytes in as out where the sizes are known
// (INVALID_ARGUMENT).
iron_status_t iron_bitcast_plan_read(const iron_ir_op_t *op,
                                     iron_bitcast_plan_t *out);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_PLANS_BITCAST_PLAN_H_
