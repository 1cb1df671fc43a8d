// Cheap element-wise values recomputed by each consumer instead of written
// once and read back (issue 14). jax's batch norm computes `x - mean` and
// uses it in the variance's reduce, in the normalization and, through
// autodiff, in several kernels of the backward pass; each such value that
// fusion cannot keep in one kernel (a reduce takes its producers only when
// nothing else of theirs is used outside) is a full-size array written and
// read back. XLA recomputes such producers in every consumer fusion. This
// pass does the same before element-wise fusion (fuse.h): it gives each
// consumer its own copy of the value's little expression, so the fusion
// pass puts the copy into the consumer's kernel.
//
// A value V (the one result of an op of a block) is copied when all of:
// - V's expression, V's op and the ops it is computed from through other
//   such ops, is at most IRON_RECOMPUTE_MAX_OPS cheap element-wise ops
//   (add, subtract, multiply, divide, negate, abs, maximum, minimum,
//   select, compare, convert, clamp, and, or, xor, not, broadcast_in_dim),
//   all of which the device fuses; its leaves are the other values it
//   reads;
// - the leaves of V's size take no more bytes than V (copies never read
//   more than V; broadcast operands are small and not counted): `x - mean`
//   of an f32 x qualifies, `a + b` of two full arrays or a pred mask of an
//   f32 array do not;
// - V takes at least iron_recompute_min_bytes() (1 MiB): below that, writing it and
//   reading it back costs less than the launch a copy adds when the fusion
//   pass cannot put it into its consumer's kernel (measured on the model
//   zoo's plans: scalar copies of jax.random's samplers stood alone);
// - V is used by at least two ops, all in V's block, each an element-wise
//   op the device fuses or a reduce that reads V as a reduced operand (so
//   every copy goes into a fused kernel and V itself need not be written).
// The first user keeps V; every later user gets a copy of the expression
// placed right before it. Copies are new ops with new values; they carry
// the locations of the ops they copy.
#ifndef IRON_COMPILER_RECOMPUTE_H_
#define IRON_COMPILER_RECOMPUTE_H_

#include <stdbool.h>

#include "base/status.h"
#include "compiler/fuse.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

#define IRON_RECOMPUTE_MAX_OPS 32
#define IRON_RECOMPUTE_MIN_BYTES ((size_t)1 << 20)

// The floor on copied (and merged, merge_producers.h) values' bytes:
// IRON_RECOMPUTE_MIN_BYTES, or IRON_FUSE_MIN_COPY_BYTES when set (compile
// time; 0 lets the random-program fuzzer's small programs take the
// passes' paths).
size_t iron_recompute_min_bytes(void);

// Ops cheap enough to compute again in every consumer's kernel (the list
// above; merge_producers.h uses it too).
bool iron_recompute_cheap_kind(iron_op_kind_t k);

// Element-wise ops (unary, binary, select, clamp, compare, convert): the
// consumers a copy (or a merged producer, merge_producers.h) goes into.
bool iron_recompute_elementwise_kind(iron_op_kind_t k);

// Copies the values described above in every block of every function of
// `m` (function bodies and the regions of control flow that the device
// does not generate whole; not the regions of kernel ops). `can_fuse` is
// the device's fusion predicate (fuse.h).
// *out_copies (may be NULL) counts the expressions copied.
iron_status_t iron_compiler_recompute(iron_ir_module_t *m,
                                      iron_fuse_predicate_t can_fuse,
                                      int *out_copies);

// false when IRON_FUSE_RECOMPUTE=0 (compile time): the callers then skip
// the pass.
bool iron_compiler_recompute_on(void);

#ifdef __cplusplus
}
#endif

#endif  // IRON_COMPILER_RECOMPUTE_H_
