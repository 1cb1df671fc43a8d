// The window of stablehlo.reduce_window and stablehlo.select_and_scatter,
// read and validated once for every device (host window.c, CUDA
// cuda_window.c), so that the devices accept and refuse the same programs
// with the same statuses and messages, and computed in O(rank): no
// per-output table is built at compile time (issue 13: per-output offset
// lists of a 2^20-element sliding max took ~1 GB while compiling). The
// geometry of one output is derived when the kernel runs
// (iron_window_plan_dim_offsets) or by generated code.
//
// Semantics: the input is base-dilated (holes between elements) and padded;
// a window of wdims, dilated by win_dil, slides with strides. Positions on
// padding or holes are skipped (not combined with the init value).
//
// Validation runs in three steps, in this order (a device may add its own
// refusals between them, e.g. its operand-count or dtype limits):
//   1. iron_window_plan_check_types: operand/result/region counts, static
//      tensors (UNIMPLEMENTED through iron_ir_op_unimplemented otherwise),
//      shapes and dtypes that agree (INVALID_ARGUMENT);
//   2. iron_window_plan_read_attrs: the window attributes (lengths, values
//      >= 1, no overflow in any size derived from them; INVALID_ARGUMENT
//      naming the op and the attribute or dim);
//   3. iron_window_plan_check_sizes: the declared result (reduce_window) or
//      source (select_and_scatter) dims against the window's
//      (INVALID_ARGUMENT).
// iron_window_plan_read runs all three.
#ifndef IRON_DEVICE_WINDOW_PLAN_H_
#define IRON_DEVICE_WINDOW_PLAN_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "ir/ir.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct iron_window_plan {
  // Step 1. reduce_window: num_inputs inputs, as many init values and
  // results; select_and_scatter: 1 (operand, source, init value).
  bool select_and_scatter;
  uint32_t num_inputs;
  const iron_ir_type_t *in;      // operand 0 (every input has its shape)
  const iron_ir_type_t *source;  // select_and_scatter's source, else NULL
  // Step 2, per dim d (defaults filled in; select_and_scatter has no
  // dilations: 1).
  int32_t rank;
  int64_t in_dims[IRON_MAX_RANK];
  int64_t wdims[IRON_MAX_RANK], strides[IRON_MAX_RANK];
  int64_t base_dil[IRON_MAX_RANK], win_dil[IRON_MAX_RANK];
  int64_t pad_lo[IRON_MAX_RANK], pad_hi[IRON_MAX_RANK];
  // Base-dilated input extent: (n - 1) * base_dil + 1, 0 when n == 0.
  int64_t dil_in[IRON_MAX_RANK];
  // Row-major element strides of the input.
  int64_t in_strides[IRON_MAX_RANK];
  // Windows per dim: reduce_window's result dims, select_and_scatter's
  // source dims.
  int64_t out_dims[IRON_MAX_RANK];
  int64_t out_count;  // product of out_dims
  int64_t win_count;  // product of wdims (window positions, valid or not)
  // Per dim, an upper bound of the valid positions of one window:
  // min(wdims[d], in_dims[d]) (distinct positions read distinct elements).
  int64_t max_valid[IRON_MAX_RANK];
} iron_window_plan_t;

// Step 1. Fills select_and_scatter, num_inputs, in, source.
iron_status_t iron_window_plan_check_types(const iron_ir_op_t *op,
                                           iron_window_plan_t *out);
// Step 2 (after step 1 on the same *out).
iron_status_t iron_window_plan_read_attrs(const iron_ir_op_t *op,
                                          iron_window_plan_t *out);
// Step 3 (after step 2 on the same *out).
iron_status_t iron_window_plan_check_sizes(const iron_ir_op_t *op,
                                           const iron_window_plan_t *plan);

// Steps 1-3. *out is zeroed first.
iron_status_t iron_window_plan_read(const iron_ir_op_t *op,
                                    iron_window_plan_t *out);

// The valid input positions of window `o` (0 <= o < out_dims[d]) along dim
// d, in window order, as element offsets (input index times in_strides[d])
// in out_offs (room for max_valid[d] entries). Returns how many. Work is
// O(returned count + log), whatever the window's size or dilations.
int64_t iron_window_plan_dim_offsets(const iron_window_plan_t *p, int32_t d,
                                     int64_t o, int64_t *out_offs);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_WINDOW_PLAN_H_
