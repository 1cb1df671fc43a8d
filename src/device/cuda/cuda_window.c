// stablehlo.reduce_window on the CUDA device (cuda_gen_window.c). The
// window is the shared plan's (src/device/window_plan.h: the host's checks
// and messages). select_and_scatter: a fill kernel writes the init value,
// then the generated select/scatter kernel runs.
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_window.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_ops_internal.h"
#include "device/plans/reduce_plan.h"

typedef struct window_params {
  uint32_t num;
  iron_cuda_function_t *fn;
  unsigned grid;
  bool empty;
} window_params_t;

iron_status_t iron_cuda_window_plan(const iron_ir_op_t *op,
                                    iron_window_plan_t *out_plan,
                                    iron_cuda_window_t *out_w) {
  memset(out_plan, 0, sizeof(*out_plan));
  memset(out_w, 0, sizeof(*out_w));
  IRON_RETURN_IF_ERROR_PLAIN(iron_window_plan_check_types(op, out_plan));
  if (out_plan->num_inputs > IRON_CUDA_WINDOW_MAX_OPERANDS)
    return iron_ir_op_unimplemented(op, "on cuda for %u operands",
                                    out_plan->num_inputs);
  IRON_RETURN_IF_ERROR_PLAIN(iron_window_plan_read_attrs(op, out_plan));
  IRON_RETURN_IF_ERROR_PLAIN(iron_window_plan_check_sizes(op, out_plan));
  const iron_window_plan_t *g = out_plan;
  out_w->rank = g->rank;
  for (int32_t d = 0; d < g->rank; ++d) {
    out_w->in_dims[d] = g->in_dims[d];
    out_w->out_dims[d] = g->out_dims[d];
    out_w->wdims[d] = g->wdims[d];
    out_w->strides[d] = g->strides[d];
    out_w->base_dil[d] = g->base_dil[d];
    out_w->win_dil[d] = g->win_dil[d];
    out_w->pad_lo[d] = g->pad_lo[d];
  }
  return IRON_OK;
}

// True (and *out filled) when the window is a cumulative one the host scans
// (window.c detect_scan: one non-trivial dim, window = its size n, stride
// and dilations 1, padding n-1 or n on one side only).
static bool detect_scan(const iron_window_plan_t *g, iron_op_kind_t kind,
                        iron_cuda_scan_t *out) {
  int32_t sd = -1;
  for (int32_t d = 0; d < g->rank; ++d) {
    bool trivial = g->wdims[d] == 1 && g->strides[d] == 1 &&
                   g->base_dil[d] == 1 && g->win_dil[d] == 1 &&
                   g->pad_lo[d] == 0 && g->pad_hi[d] == 0;
    if (trivial) continue;
    if (sd >= 0) return false;
    sd = d;
  }
  if (sd < 0) return false;
  int64_t n = g->in_dims[sd];
  if (n < 1 || g->wdims[sd] != n || g->strides[sd] != 1 ||
      g->base_dil[sd] != 1 || g->win_dil[sd] != 1)
    return false;
  int64_t lo = g->pad_lo[sd], hi = g->pad_hi[sd];
  bool fwd = (lo == n - 1 || lo == n) && hi == 0;
  bool rev = (hi == n - 1 || hi == n) && lo == 0;
  if (!fwd && !rev) return false;
  memset(out, 0, sizeof(*out));
  out->kind = kind;
  out->n = n;
  out->rev = !fwd;
  out->excl = lo + hi == n;
  out->outer = out->inner = 1;
  for (int32_t d = 0; d < sd; ++d) out->outer *= g->in_dims[d];
  for (int32_t d = sd + 1; d < g->rank; ++d) out->inner *= g->in_dims[d];
  return true;
}

static iron_status_t window_prepare_on(iron_device_t *base,
                                       const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  iron_window_plan_t g;
  iron_cuda_window_t w;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_window_plan(op, &g, &w));
  uint32_t num = g.num_inputs;
  iron_dtype_t dts[IRON_CUDA_WINDOW_MAX_OPERANDS];
  for (uint32_t i = 0; i < num; ++i) dts[i] = op->operands[i]->type->dtype;
  const iron_ir_type_t *ot = op->results[0].type;
  const iron_region_t body = iron_cuda_op_region(op, regions, 0);
  window_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->num = num;
  p->empty = iron_ir_type_num_elements(ot) == 0;
  char *src = NULL;
  iron_status_t st;
  iron_cuda_scan_t scan;
  iron_op_kind_t k1 =
      num == 1 ? iron_reduce_plan_body_op(body.ir, dts[0]) : IRON_OP_UNKNOWN;
  if (num == 1 && !p->empty && iron_cuda_scan_supported(k1, dts[0]) &&
      detect_scan(&g, k1, &scan)) {
    // The host's (and XLA:CPU's) two-level scan order, not the window's
    // sequential fold: float sums round as XLA:CPU's.
    st = iron_cuda_gen_scan("iron_reduce_window", &scan, dts[0], &src,
                            &p->grid);
  } else {
    st = iron_cuda_gen_reduce_window("iron_reduce_window", &w, num, dts,
                                     &body, &src, &p->grid);
  }
  if (st) {
    free(p);
    return iron_cuda_ops_refused(op, st);
  }
  st = iron_cuda_ops_request(dev, src, "iron_reduce_window", &p->fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t window_run(const iron_kernel_ctx_t *ctx, const void *params,
                                const iron_tensor_t *const *inputs,
                                iron_tensor_t *const *outputs) {
  const window_params_t *p = params;
  if (p->empty) return IRON_OK;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  void *ptrs[3 * IRON_CUDA_WINDOW_MAX_OPERANDS];
  void *args[3 * IRON_CUDA_WINDOW_MAX_OPERANDS];
  for (uint32_t i = 0; i < 2 * p->num; ++i) ptrs[i] = inputs[i]->data;
  for (uint32_t i = 0; i < p->num; ++i) ptrs[2 * p->num + i] = outputs[i]->data;
  for (uint32_t i = 0; i < 3 * p->num; ++i) args[i] = &ptrs[i];
  return iron_cuda_launch(dev, p->fn, p->grid, 1, 1, 256, 0, args);
}

typedef struct sas_params {
  iron_cuda_function_t *fill, *fn;
  unsigned fill_grid, grid;
  bool empty, no_source;
} sas_params_t;

static iron_status_t sas_prepare_on(iron_device_t *base, const iron_ir_op_t *op,
                                    iron_region_t *const *regions,
                                    void **out_params) {
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  iron_window_plan_t g;
  iron_cuda_window_t w;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_window_plan(op, &g, &w));
  const iron_ir_type_t *in = g.in, *src_t = g.source;
  const iron_ir_type_t *ot = op->results[0].type;
  const iron_region_t sel = iron_cuda_op_region(op, regions, 0);
  const iron_region_t sct = iron_cuda_op_region(op, regions, 1);
  sas_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  int64_t count = iron_ir_type_num_elements(ot);
  p->empty = count == 0;
  p->no_source = iron_ir_type_num_elements(src_t) == 0;
  p->fill_grid = iron_cuda_ops_grid(count);
  char *src = NULL;
  int64_t zero = 0;
  // The result starts as the init value everywhere (a stride-0 pack; the
  // narrow dtypes' bytes copied as they are).
  iron_dtype_t fdt = iron_cuda_type(in->dtype).is_narrow
                         ? IRON_DTYPE_U8
                         : in->dtype;
  iron_status_t st = iron_cuda_gen_pack("iron_sas_fill", fdt, fdt, 1, &count,
                                        &zero, &src);
  if (!st) st = iron_cuda_ops_request(dev, src, "iron_sas_fill", &p->fill);
  free(src);
  src = NULL;
  if (!st) {
    st = iron_cuda_gen_select_and_scatter("iron_select_and_scatter", &w,
                                          in->dtype, &sel, &sct, &src,
                                          &p->grid);
    if (st) st = iron_cuda_ops_refused(op, st);
  }
  if (!st)
    st = iron_cuda_ops_request(dev, src, "iron_select_and_scatter", &p->fn);
  free(src);
  if (st) {
    free(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t sas_run(const iron_kernel_ctx_t *ctx, const void *params,
                             const iron_tensor_t *const *inputs,
                             iron_tensor_t *const *outputs) {
  const sas_params_t *p = params;
  if (p->empty) return IRON_OK;
  iron_cuda_device_t *dev = iron_cuda_device_cast(ctx->dev);
  void *fp[2] = {inputs[2]->data, outputs[0]->data};
  void *fa[2] = {&fp[0], &fp[1]};
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_cuda_launch(dev, p->fill, p->fill_grid, 1, 1, 256, 0, fa));
  if (p->no_source) return IRON_OK;
  void *ptrs[3] = {inputs[0]->data, inputs[1]->data, outputs[0]->data};
  void *args[3] = {&ptrs[0], &ptrs[1], &ptrs[2]};
  return iron_cuda_launch(dev, p->fn, p->grid, 1, 1, 256, 0, args);
}

static const iron_kernel_t kSelectAndScatter = {
    .name = "cuda_select_and_scatter",
    .run = sas_run,
    .prepare_on = sas_prepare_on,
    .graph_capturable = true};

static const iron_kernel_t kReduceWindow = {
    .name = "cuda_reduce_window",
    .run = window_run,
    .prepare_on = window_prepare_on,
    .graph_capturable = true};

void iron_cuda_register_window(iron_cuda_kernel_table_t table) {
  table[IRON_OP_REDUCE_WINDOW] = &kReduceWindow;
  table[IRON_OP_SELECT_AND_SCATTER] = &kSelectAndScatter;
}
