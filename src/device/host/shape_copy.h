// Strided element copies: the one engine behind every data-movement kernel
// (broadcast, transpose, slice, pad, concatenate, reverse, dynamic slices)
// and the operand packing of dot/reduce. A plan describes a rectangular
// iteration space and, per dimension, the source and destination strides in
// elements (zero = broadcast, negative = reversed). Plans are built at
// prepare time; running one only moves bytes.
#ifndef IRON_DEVICE_HOST_SHAPE_COPY_H_
#define IRON_DEVICE_HOST_SHAPE_COPY_H_

#include <stddef.h>
#include <stdint.h>

#include "base/threadpool.h"
#include "ir/ir.h"

typedef struct iron_host_copy_plan {
  int32_t rank;  // after iron_host_copy_plan_finalize: 0 = one element
  int64_t dims[IRON_MAX_RANK];
  int64_t src_strides[IRON_MAX_RANK];
  int64_t dst_strides[IRON_MAX_RANK];
  int64_t src_offset;  // elements
  int64_t dst_offset;  // elements
  size_t elem_size;    // bytes (0: nothing to copy)
  int64_t count;       // elements copied (0 when any dim is 0)
} iron_host_copy_plan_t;

// Drops unit dimensions and merges dimensions that are contiguous in both
// source and destination, so the innermost loop is as long as possible.
// Computes `count`.
void iron_host_copy_plan_finalize(iron_host_copy_plan_t *plan);

// Copies plan->count elements. `src_extra`/`dst_extra` are added to the
// plan's offsets (run-time offsets of dynamic slices). Splits large copies
// over `pool` (may be NULL).
void iron_host_copy_run(iron_threadpool_t *pool,
                        const iron_host_copy_plan_t *plan, const void *src,
                        void *dst, int64_t src_extra, int64_t dst_extra);

// Row-major strides (in elements) of a dims array.
void iron_host_row_major_strides(int32_t rank, const int64_t *dims,
                                 int64_t *out_strides);

// Fills `count` elements of `elem_size` bytes at dst with the element at
// `value`.
void iron_host_fill(iron_threadpool_t *pool, void *dst, int64_t count,
                    const void *value, size_t elem_size);

#endif  // IRON_DEVICE_HOST_SHAPE_COPY_H_
