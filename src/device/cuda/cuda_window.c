// stablehlo.reduce_window on the CUDA device (cuda_gen_window.c). Geometry
// checks follow the host's window.c. select_and_scatter: a fill kernel
// writes the init value, then the generated select/scatter kernel runs.
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_ops_gen.h"
#include "device/cuda/cuda_ops_internal.h"
#include "device/plans/reduce_plan.h"

typedef struct window_params {
  uint32_t num;
  iron_cuda_function_t *fn;
  unsigned grid;
  bool empty;
} window_params_t;

static iron_status_t read_list(const iron_ir_op_t *op, const char *name,
                               int32_t rank, int64_t dflt, int64_t *out) {
  uint32_t n = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, name, out, IRON_MAX_RANK, &n));
  if (n == 0) {
    for (int32_t d = 0; d < rank; ++d) out[d] = dflt;
    return IRON_OK;
  }
  if ((int32_t)n != rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: %s has %u entries for rank %d",
                    op->name, name, n, rank);
  return IRON_OK;
}

// True (and *out filled) when the window is a cumulative one the host scans
// (window.c detect_scan: one non-trivial dim, window = its size n, stride
// and dilations 1, padding n-1 or n on one side only).
static bool detect_scan(const iron_cuda_window_t *w, const int64_t *pad,
                        iron_op_kind_t kind, iron_cuda_scan_t *out) {
  int32_t sd = -1;
  for (int32_t d = 0; d < w->rank; ++d) {
    bool trivial = w->wdims[d] == 1 && w->strides[d] == 1 &&
                   w->base_dil[d] == 1 && w->win_dil[d] == 1 &&
                   pad[2 * d] == 0 && pad[2 * d + 1] == 0;
    if (trivial) continue;
    if (sd >= 0) return false;
    sd = d;
  }
  if (sd < 0) return false;
  int64_t n = w->in_dims[sd];
  if (n < 1 || w->wdims[sd] != n || w->strides[sd] != 1 ||
      w->base_dil[sd] != 1 || w->win_dil[sd] != 1)
    return false;
  int64_t lo = pad[2 * sd], hi = pad[2 * sd + 1];
  bool fwd = (lo == n - 1 || lo == n) && hi == 0;
  bool rev = (hi == n - 1 || hi == n) && lo == 0;
  if (!fwd && !rev) return false;
  memset(out, 0, sizeof(*out));
  out->kind = kind;
  out->n = n;
  out->rev = !fwd;
  out->excl = lo + hi == n;
  out->outer = out->inner = 1;
  for (int32_t d = 0; d < sd; ++d) out->outer *= w->in_dims[d];
  for (int32_t d = sd + 1; d < w->rank; ++d) out->inner *= w->in_dims[d];
  return true;
}

static iron_status_t window_prepare_on(iron_device_t *base,
                                       const iron_ir_op_t *op,
                                       iron_region_t *const *regions,
                                       void **out_params) {
  iron_cuda_device_t *dev = iron_cuda_device_cast(base);
  if (op->num_operands == 0 || op->num_operands % 2 ||
      op->num_results != op->num_operands / 2 || op->num_regions != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad operand/result counts",
                    op->name);
  uint32_t num = op->num_results;
  if (num > 8)
    return iron_ir_op_unimplemented(op, "on cuda for %u operands", num);
  const iron_ir_type_t *in = op->operands[0]->type;
  iron_dtype_t dts[8];
  for (uint32_t i = 0; i < num; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (t->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t) ||
        t->rank != in->rank ||
        memcmp(t->dims, in->dims, sizeof(int64_t) * (size_t)t->rank))
      return iron_ir_op_unimplemented(op, "on cuda for these operand types");
    dts[i] = t->dtype;
    if (op->operands[num + i]->type->dtype != dts[i] ||
        op->results[i].type->dtype != dts[i])
      return iron_ir_op_unimplemented(op, "on cuda with mixed dtypes");
  }
  iron_cuda_window_t w;
  memset(&w, 0, sizeof(w));
  int32_t rank = in->rank;
  w.rank = rank;
  int64_t pad[2 * IRON_MAX_RANK] = {0};
  IRON_RETURN_IF_ERROR_PLAIN(
      read_list(op, "window_dimensions", rank, 1, w.wdims));
  IRON_RETURN_IF_ERROR_PLAIN(read_list(op, "window_strides", rank, 1, w.strides));
  IRON_RETURN_IF_ERROR_PLAIN(
      read_list(op, "base_dilations", rank, 1, w.base_dil));
  IRON_RETURN_IF_ERROR_PLAIN(
      read_list(op, "window_dilations", rank, 1, w.win_dil));
  uint32_t np = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "padding", pad, 2 * IRON_MAX_RANK, &np));
  if (np != 0 && (int32_t)np != 2 * rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: padding has %u entries for rank %d",
                    op->name, np, rank);
  const iron_ir_type_t *ot = op->results[0].type;
  if (ot->rank != rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: result rank mismatch", op->name);
  for (int32_t d = 0; d < rank; ++d) {
    int64_t n = in->dims[d];
    if (w.wdims[d] < 1 || w.strides[d] < 1 || w.base_dil[d] < 1 ||
        w.win_dil[d] < 1 || w.wdims[d] > (1 << 30) ||
        w.strides[d] > (1ll << 40) || w.base_dil[d] > (1 << 30) ||
        w.win_dil[d] > (1 << 30) || llabs(pad[2 * d]) > (1ll << 40) ||
        llabs(pad[2 * d + 1]) > (1ll << 40))
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad window in dim %d", op->name,
                      d);
    int64_t dil_in = n == 0 ? 0 : (n - 1) * w.base_dil[d] + 1;
    int64_t padded = dil_in + pad[2 * d] + pad[2 * d + 1];
    int64_t ext = (w.wdims[d] - 1) * w.win_dil[d] + 1;
    int64_t out = padded < ext ? 0 : (padded - ext) / w.strides[d] + 1;
    if (ot->dims[d] != out)
      return IRON_ERR(INVALID_ARGUMENT, "%s: result dim %d is %lld, not %lld",
                      op->name, d, (long long)ot->dims[d], (long long)out);
    w.in_dims[d] = n;
    w.out_dims[d] = out;
    w.pad_lo[d] = pad[2 * d];
  }
  const iron_ir_region_t *body =
      regions && regions[0] ? regions[0]->ir : &op->regions[0];
  window_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->num = num;
  p->empty = iron_ir_type_num_elements(ot) == 0;
  char *src = NULL;
  iron_status_t st;
  iron_cuda_scan_t scan;
  iron_op_kind_t k1 =
      num == 1 ? iron_reduce_plan_body_op(body, dts[0]) : IRON_OP_UNKNOWN;
  if (num == 1 && !p->empty && iron_cuda_scan_supported(k1, dts[0]) &&
      detect_scan(&w, pad, k1, &scan)) {
    // The host's (and XLA:CPU's) two-level scan order, not the window's
    // sequential fold: float sums round as XLA:CPU's.
    st = iron_cuda_gen_scan("iron_reduce_window", &scan, dts[0], &src,
                            &p->grid);
  } else {
    iron_cuda_ops_region_module(regions);
    st = iron_cuda_gen_reduce_window("iron_reduce_window", &w, num, dts, body,
                                     &src, &p->grid);
    iron_cuda_ops_region_module(NULL);
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
  void *ptrs[24], *args[24];
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
  if (op->num_operands != 3 || op->num_results != 1 || op->num_regions != 2)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad operand/result/region counts",
                    op->name);
  const iron_ir_type_t *in = op->operands[0]->type;
  const iron_ir_type_t *src_t = op->operands[1]->type;
  const iron_ir_type_t *ot = op->results[0].type;
  for (int i = 0; i < 3; ++i)
    if (!iron_ir_type_is_static(op->operands[i]->type) ||
        op->operands[i]->type->dtype != in->dtype)
      return iron_ir_op_unimplemented(op, "on cuda for these operand types");
  if (!iron_ir_type_equal(in, ot))
    return IRON_ERR(INVALID_ARGUMENT, "%s: result type differs", op->name);
  iron_cuda_window_t w;
  memset(&w, 0, sizeof(w));
  int32_t rank = in->rank;
  w.rank = rank;
  int64_t pad[2 * IRON_MAX_RANK] = {0};
  IRON_RETURN_IF_ERROR_PLAIN(
      read_list(op, "window_dimensions", rank, 1, w.wdims));
  IRON_RETURN_IF_ERROR_PLAIN(read_list(op, "window_strides", rank, 1, w.strides));
  uint32_t np = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "padding", pad, 2 * IRON_MAX_RANK, &np));
  if (np != 0 && (int32_t)np != 2 * rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: padding has %u entries for rank %d",
                    op->name, np, rank);
  if (src_t->rank != rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: source rank mismatch", op->name);
  for (int32_t d = 0; d < rank; ++d) {
    int64_t n = in->dims[d];
    if (w.wdims[d] < 1 || w.strides[d] < 1 || w.wdims[d] > (1 << 30) ||
        w.strides[d] > (1ll << 40) || llabs(pad[2 * d]) > (1ll << 40) ||
        llabs(pad[2 * d + 1]) > (1ll << 40))
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad window in dim %d", op->name,
                      d);
    int64_t padded = n + pad[2 * d] + pad[2 * d + 1];
    int64_t out = padded < w.wdims[d] ? 0 : (padded - w.wdims[d]) / w.strides[d] + 1;
    if (src_t->dims[d] != out)
      return IRON_ERR(INVALID_ARGUMENT, "%s: source dim %d is %lld, not %lld",
                      op->name, d, (long long)src_t->dims[d], (long long)out);
    w.in_dims[d] = n;
    w.out_dims[d] = out;
    w.pad_lo[d] = pad[2 * d];
    w.base_dil[d] = w.win_dil[d] = 1;
  }
  const iron_ir_region_t *sel =
      regions && regions[0] ? regions[0]->ir : &op->regions[0];
  const iron_ir_region_t *sct =
      regions && regions[1] ? regions[1]->ir : &op->regions[1];
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
  iron_dtype_t fdt = iron_cuda_gen_type_narrow(in->dtype).is_narrow
                         ? IRON_DTYPE_U8
                         : in->dtype;
  iron_status_t st = iron_cuda_gen_pack("iron_sas_fill", fdt, fdt, 1, &count,
                                        &zero, &src);
  if (!st) st = iron_cuda_ops_request(dev, src, "iron_sas_fill", &p->fill);
  free(src);
  src = NULL;
  if (!st) {
    iron_cuda_ops_region_module(regions);
    st = iron_cuda_gen_select_and_scatter("iron_select_and_scatter", &w,
                                          in->dtype, sel, sct, &src, &p->grid);
    iron_cuda_ops_region_module(NULL);
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
