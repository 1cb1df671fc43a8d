// Typed reduction loops for reduce bodies that are one associative op
// (add, multiply, maximum, minimum, and, or, xor) on one input. The input is
// viewed as [outer, reduced, inner]; accumulation is pairwise (rows) or
// cascaded in blocks (columns), so long float sums stay accurate. f16/bf16
// accumulate in f32; float max/min propagate NaN like XLA.
#ifndef IRON_DEVICE_HOST_REDUCE_FAST_H_
#define IRON_DEVICE_HOST_REDUCE_FAST_H_

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "ir/ir.h"

typedef struct iron_host_reduce_impl {
  // out = op-reduction of x[0..n) (n >= 1), in the accumulation type.
  void (*row)(const void *x, int64_t n, void *out);
  // out[0..w) = reduction over r in [0, n) of x[r*stride + i]; `scratch`
  // holds 64*w accumulation elements.
  void (*cols)(const void *x, int64_t n, int64_t stride, int64_t w,
               void *out, void *scratch);
  // a[i] = op(a[i], b[i]) on accumulation elements.
  void (*combine)(void *a, const void *b, int64_t n);
  // out[i] = op(init, acc[i]) stored in the input dtype.
  void (*finish)(const void *acc, const void *init, void *out, int64_t n);
  size_t acc_size;  // bytes per accumulation element
} iron_host_reduce_impl_t;

// The loops for `kind` (IRON_OP_ADD ...) on `dtype`, or NULL.
const iron_host_reduce_impl_t *iron_host_reduce_impl_lookup(
    iron_op_kind_t kind, iron_dtype_t dtype);

#endif  // IRON_DEVICE_HOST_REDUCE_FAST_H_
