// The host kernel of stablehlo.custom_call: finds the target by name at
// compile time and converts operands/results between the row-major storage
// of the runtime and the layouts the call declared (custom_call.h).
#include "device/host/custom_call.h"

#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "device/host/callback.h"
#include "device/host/ew_common.h"

typedef struct {
  bool relayout;  // false: the declared layout is row-major
  int32_t rank;
  int64_t m2m[IRON_MAX_RANK];
} cc_layout_t;

typedef struct {
  const iron_host_custom_call_target_t *target;
  void *target_params;
  uint32_t num_inputs, num_outputs;
  cc_layout_t *layouts;  // inputs then outputs
} cc_params_t;

// --- Trivial targets jax emits on every platform ----------------------------

// "dce_sink" (lax.dce_sink with prevent_mlir_dce): keeps a value alive; no
// results, nothing to do.
static iron_status_t dce_sink_prepare(const iron_ir_op_t *op,
                                      void **out_params) {
  if (op->num_results != 0)
    return iron_ir_op_unimplemented(op, "dce_sink with %u results",
                                    op->num_results);
  *out_params = NULL;
  return IRON_OK;
}
static iron_status_t dce_sink_run(const iron_kernel_ctx_t *ctx,
                                  const void *params,
                                  const iron_tensor_t *const *inputs,
                                  iron_tensor_t *const *outputs) {
  return IRON_OK;
}
static const iron_host_custom_call_target_t kDceSink = {
    /* .name = */ "dce_sink",
    /* .prepare = */ dce_sink_prepare,
    /* .run = */ dce_sink_run,
    /* .destroy = */ NULL,
};

static const iron_host_custom_call_target_t *find_target(const char *name) {
  if (!name) return NULL;
  if (strcmp(name, "dce_sink") == 0) return &kDceSink;
  const iron_host_custom_call_target_t *t =
      iron_host_custom_call_tridiag_find(name);
  return t ? t : iron_host_custom_call_lapack_find(name);
}

// --- Attributes -------------------------------------------------------------

iron_status_t iron_host_custom_call_layout(const iron_ir_op_t *op,
                                           bool result, uint32_t index,
                                           int64_t *out_m2m) {
  const iron_ir_value_t *v =
      result ? &op->results[index] : op->operands[index];
  int32_t rank = v->type->kind == IRON_TYPE_TENSOR ? v->type->rank : 0;
  for (int32_t d = 0; d < rank; ++d) out_m2m[d] = rank - 1 - d;
  const iron_ir_attr_t *all =
      iron_ir_op_attr(op, result ? "result_layouts" : "operand_layouts");
  if (!all) return IRON_OK;
  if (all->kind != IRON_ATTR_ARRAY ||
      all->array.count != (result ? op->num_results : op->num_operands))
    return IRON_ERR(INVALID_ARGUMENT, "%s: malformed %s", op->name,
                    result ? "result_layouts" : "operand_layouts");
  int64_t m2m[IRON_MAX_RANK];
  uint32_t n = 0;
  IRON_RETURN_IF_ERROR(
      iron_ir_attr_i64_list(all->array.items[index], "layout", m2m,
                            IRON_MAX_RANK, &n),
      "in a custom call layout");
  bool seen[IRON_MAX_RANK] = {false};
  if ((int32_t)n != rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: layout of %s %u has %u entries for "
                    "rank %d", op->name, result ? "result" : "operand", index,
                    n, rank);
  for (uint32_t d = 0; d < n; ++d) {
    if (m2m[d] < 0 || m2m[d] >= rank || seen[m2m[d]])
      return IRON_ERR(INVALID_ARGUMENT, "%s: layout of %s %u is not a "
                      "permutation", op->name, result ? "result" : "operand",
                      index);
    seen[m2m[d]] = true;
    out_m2m[d] = m2m[d];
  }
  return IRON_OK;
}

const iron_ir_attr_t *iron_host_custom_call_ffi_attr(const iron_ir_op_t *op,
                                                     const char *name) {
  const iron_ir_attr_t *d = iron_ir_op_attr(op, "mhlo.backend_config");
  if (!d || d->kind != IRON_ATTR_DICT) d = iron_ir_op_attr(op, "backend_config");
  if (!d || d->kind != IRON_ATTR_DICT) return NULL;
  return iron_ir_dict_get(d, name);
}

// --- Layout conversion ------------------------------------------------------

// Copies between row-major `logical` and `physical` (the layout m2m) for a
// tensor of dims `t`: to_physical chooses the direction.
static void relayout(const iron_tensor_t *t, const int64_t *m2m,
                     const char *src, char *dst, bool to_physical) {
  const int32_t rank = t->rank;
  const size_t es = iron_dtype_size(t->dtype);
  int64_t pstride[IRON_MAX_RANK];
  int64_t s = 1;
  for (int32_t k = 0; k < rank; ++k) {
    pstride[m2m[k]] = s;
    s *= t->dims[m2m[k]];
  }
  int64_t idx[IRON_MAX_RANK] = {0};
  int64_t phys = 0;
  for (int64_t i = 0; i < t->count; ++i) {
    if (to_physical)
      memcpy(dst + (size_t)phys * es, src + (size_t)i * es, es);
    else
      memcpy(dst + (size_t)i * es, src + (size_t)phys * es, es);
    for (int32_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < t->dims[d]) {
        phys += pstride[d];
        break;
      }
      phys -= pstride[d] * (t->dims[d] - 1);
      idx[d] = 0;
    }
  }
}

// --- The kernel -------------------------------------------------------------

static void cc_destroy(void *p) {
  cc_params_t *cp = p;
  if (!cp) return;
  if (cp->target_params) {
    if (cp->target->destroy)
      cp->target->destroy(cp->target_params);
    else
      free(cp->target_params);
  }
  free(cp->layouts);
  free(cp);
}

static iron_status_t cc_prepare(const iron_ir_op_t *op,
                                iron_region_t *const *regions,
                                void **out_params) {
  const char *name = iron_ir_op_string(op, "call_target_name");
  const iron_host_custom_call_target_t *target = find_target(name);
  if (!target)
    return iron_ir_op_unimplemented(op, "for target \"%s\"", name ? name : "");
  cc_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->target = target;
  p->num_inputs = op->num_operands;
  p->num_outputs = op->num_results;
  uint32_t n = op->num_operands + op->num_results;
  p->layouts = calloc(n ? n : 1, sizeof(cc_layout_t));
  if (!p->layouts) {
    cc_destroy(p);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  for (uint32_t i = 0; i < n; ++i) {
    bool result = i >= op->num_operands;
    uint32_t index = result ? i - op->num_operands : i;
    cc_layout_t *l = &p->layouts[i];
    iron_status_t st = iron_host_custom_call_layout(op, result, index, l->m2m);
    if (st) {
      cc_destroy(p);
      return st;
    }
    const iron_ir_value_t *v = result ? &op->results[index] : op->operands[index];
    l->rank = v->type->kind == IRON_TYPE_TENSOR ? v->type->rank : 0;
    for (int32_t d = 0; d < l->rank; ++d) {
      // Dimensions of size 1 do not change the byte order.
      if (l->m2m[d] != l->rank - 1 - d) l->relayout = true;
    }
  }
  iron_status_t st = target->prepare(op, &p->target_params);
  if (st) {
    cc_destroy(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

static iron_status_t cc_run(const iron_kernel_ctx_t *ctx, const void *params,
                            const iron_tensor_t *const *inputs,
                            iron_tensor_t *const *outputs) {
  const cc_params_t *p = params;
  enum { kMaxArgs = 16 };
  if (p->num_inputs > kMaxArgs || p->num_outputs > kMaxArgs)
    return IRON_ERR(UNIMPLEMENTED, "custom call %s with more than %d operands "
                    "or results", p->target->name, kMaxArgs);
  iron_tensor_t in_t[kMaxArgs], out_t[kMaxArgs];
  const iron_tensor_t *in_p[kMaxArgs];
  iron_tensor_t *out_p[kMaxArgs];
  void *scratch[2 * kMaxArgs] = {NULL};
  iron_status_t st = IRON_OK;
  for (uint32_t i = 0; i < p->num_inputs; ++i) {
    in_p[i] = inputs[i];
    const cc_layout_t *l = &p->layouts[i];
    if (!l->relayout || inputs[i]->count <= 1) continue;
    scratch[i] = malloc(inputs[i]->nbytes);
    if (!scratch[i]) {
      st = IRON_ERR(RESOURCE_EXHAUSTED, "custom call %s: out of memory",
                    p->target->name);
      goto done;
    }
    relayout(inputs[i], l->m2m, inputs[i]->data, scratch[i], true);
    in_t[i] = *inputs[i];
    in_t[i].data = scratch[i];
    in_p[i] = &in_t[i];
  }
  for (uint32_t o = 0; o < p->num_outputs; ++o) {
    out_p[o] = outputs[o];
    const cc_layout_t *l = &p->layouts[p->num_inputs + o];
    if (!l->relayout || outputs[o]->count <= 1) continue;
    scratch[kMaxArgs + o] = malloc(outputs[o]->nbytes);
    if (!scratch[kMaxArgs + o]) {
      st = IRON_ERR(RESOURCE_EXHAUSTED, "custom call %s: out of memory",
                    p->target->name);
      goto done;
    }
    out_t[o] = *outputs[o];
    out_t[o].data = scratch[kMaxArgs + o];
    out_p[o] = &out_t[o];
  }
  // XLA:CPU runs custom-call handlers (jaxlib's LAPACK and tridiagonal
  // ones) on its own threads, with denormals flushed to zero: a denormal
  // pivot reads as 0 there (tridiagonal_solve_perturbed then perturbs it).
  uint64_t fpenv = iron_ew_fpenv_enter();
  st = p->target->run(ctx, p->target_params, in_p, out_p);
  iron_ew_fpenv_leave(fpenv);
  if (!st) {
    for (uint32_t o = 0; o < p->num_outputs; ++o)
      if (scratch[kMaxArgs + o])
        relayout(outputs[o], p->layouts[p->num_inputs + o].m2m,
                 scratch[kMaxArgs + o], outputs[o]->data, false);
  }
done:
  for (uint32_t i = 0; i < 2 * kMaxArgs; ++i) free(scratch[i]);
  return st;
}

static const iron_kernel_t kCustomCall = {
    /* .name = */ "custom_call",
    /* .prepare = */ cc_prepare,
    /* .run = */ cc_run,
    /* .destroy = */ cc_destroy,
    /* .inplace_ok = */ false,
    /* .elementwise = */ false,
};

void iron_host_register_custom_call(iron_kernel_table_t table) {
  table[IRON_OP_CUSTOM_CALL] = &kCustomCall;
}

const iron_kernel_t *iron_reference_custom_call_kernel(const char *target) {
  if (!target) return NULL;
  const iron_kernel_t *k = iron_host_callback_kernel_for_target(target);
  if (k) return k;
  // The host's custom_call kernel serves jaxlib's LAPACK targets and
  // tridiagonal_solve_perturbed (in their declared layouts).
  if (iron_host_custom_call_lapack_find(target) ||
      iron_host_custom_call_tridiag_find(target))
    return iron_host_kernel_lookup(IRON_OP_CUSTOM_CALL);
  return NULL;
}
