// Fusion code generation (gen/fusion.h): a fusion's DAG as one CUDA
// kernel, one thread per element of the iteration space (grid-stride;
// 16-byte vectors per thread when no op needs coordinates), or as a
// __device__ function of the element index (device_fn).
//
// Each IR value becomes a local of its compute type (gen/types.h), each
// op one statement: element-wise ops through the scalar emitter
// (gen/scalar.h, element-wise mode); broadcasts, iotas and indexed loads
// (slice, transpose, dynamic_slice of an input) here, from the element's
// coordinates. The shapes come from the planner (cuda_fusion_plan.h).
#include "device/cuda/gen/fusion.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/scalar.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"

static bool is_cplx(iron_dtype_t dt) {
  return dt == IRON_DTYPE_C64 || dt == IRON_DTYPE_C128;
}
// Integers of 8 to 64 bits (not the narrow ones, nor pred).
static bool is_int(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_S8:
    case IRON_DTYPE_S16:
    case IRON_DTYPE_S32:
    case IRON_DTYPE_S64:
    case IRON_DTYPE_U8:
    case IRON_DTYPE_U16:
    case IRON_DTYPE_U32:
    case IRON_DTYPE_U64:
      return true;
    default:
      return false;
  }
}
// The storage type of dt (narrow dtypes: a byte); NULL when not held.
static const char *st_ctype(iron_dtype_t dt) {
  return iron_cuda_type(dt).store;
}
static bool is_narrow(iron_dtype_t dt) { return iron_cuda_type(dt).is_narrow; }
static int64_t type_count(const iron_ir_type_t *t) {
  return iron_ir_type_num_elements(t);
}

// ---------------------------------------------------------------------------
// Values

typedef struct value {
  const iron_ir_value_t *v;
  char name[24];
} value_t;

typedef struct fusion_gen {
  const iron_cuda_fusion_t *f;
  iron_cuda_text_t *s;
  iron_cuda_scalar_t sc;  // the scalar emitter, element-wise mode
  value_t *vals;
  uint32_t num_vals, cap_vals;
  int32_t rank;  // the iteration space
  int64_t dims[IRON_MAX_RANK];
  int64_t count;
  const char *idx;  // "int" or "long long"
  bool vec;         // the vector kernel: inputs are the element function's
                    // parameters s<i>
} fusion_gen_t;

static const char *value_name(const fusion_gen_t *g, const iron_ir_value_t *v) {
  for (uint32_t i = 0; i < g->num_vals; ++i) {
    if (g->vals[i].v == v) return g->vals[i].name;
  }
  return NULL;
}

static iron_status_t value_add(fusion_gen_t *g, const iron_ir_value_t *v,
                               const char *fmt, uint32_t k) {
  if (g->num_vals == g->cap_vals) {
    uint32_t cap = g->cap_vals ? 2 * g->cap_vals : 32;
    value_t *nv = realloc(g->vals, cap * sizeof(*nv));
    if (!nv) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (fusion)");
    g->vals = nv;
    g->cap_vals = cap;
  }
  value_t *e = &g->vals[g->num_vals++];
  e->v = v;
  snprintf(e->name, sizeof(e->name), fmt, k);
  return IRON_OK;
}

static bool dims_equal(const fusion_gen_t *g, const iron_ir_type_t *t) {
  if (t->rank != g->rank) return false;
  for (int32_t i = 0; i < t->rank; ++i) {
    if (t->dims[i] != g->dims[i]) return false;
  }
  return true;
}

// storage -> compute (the element-wise loads)
static void emit_load(iron_cuda_text_t *s, iron_dtype_t dt, const char *var,
                      const char *lvalue) {
  iron_cuda_emit_load(s, "    ", dt, var, lvalue, true);
}

// ---------------------------------------------------------------------------
// Coordinates and indexed loads

static bool map_coords(const fusion_gen_t *g, const iron_ir_type_t *t,
                       char cn[][16]) {
  // One element (a start index, x[i] of a vector, computed for the group
  // by every thread) is at 0 whatever the group's shape.
  if (type_count(t) == 1) {
    for (int32_t d = 0; d < t->rank; ++d) snprintf(cn[d], 16, "0");
    return true;
  }
  int32_t j = 0;
  for (int32_t d = 0; d < t->rank; ++d) {
    if (t->dims[d] == 1) {
      snprintf(cn[d], 16, "0");
      continue;
    }
    while (j < g->rank && g->dims[j] == 1) ++j;
    if (j == g->rank || g->dims[j] != t->dims[d]) return false;
    snprintf(cn[d], 16, "c%d", j++);
  }
  while (j < g->rank && g->dims[j] == 1) ++j;
  return j == g->rank;
}

// The coordinates of a member of another shape than the group but as many
// elements (a load or iota that a reshape took to the group's shape): its
// own dims, from the element's linear index. Declares `<pre>_c<d>`.
static void own_coords(fusion_gen_t *g, const iron_ir_type_t *t,
                       const char *pre, char cn[][16]) {
  iron_cuda_text_printf(g->s, "    %s %s_r = (%s)i;\n", g->idx, pre, g->idx);
  for (int32_t d = t->rank - 1; d >= 0; --d) {
    snprintf(cn[d], 16, "%s_c%d", pre, d);
    iron_cuda_text_printf(g->s, "    const %s %s = %s_r %% (%s)%lld;\n", g->idx,
                          cn[d], pre, g->idx, (long long)t->dims[d]);
    if (d)
      iron_cuda_text_printf(g->s, "    %s_r /= (%s)%lld;\n", pre, g->idx,
                            (long long)t->dims[d]);
  }
}

// Names the coordinates of member result type t: the group's (map_coords),
// or its own when only the element count is the group's.
static bool member_coords(fusion_gen_t *g, const iron_ir_type_t *t,
                          const char *pre, char cn[][16]) {
  if (map_coords(g, t, cn)) return true;
  if (type_count(t) != g->count) return false;
  own_coords(g, t, pre, cn);
  return true;
}

// Declares `<pre>_s<d>` = start index d of `op` (operands first..), clamped
// so that a `part` slice fits in `full` (XLA's rule; u64 values past
// INT64_MAX clamp high).
static void emit_clamped_starts(fusion_gen_t *g, const iron_ir_op_t *op,
                                uint32_t first, const char *pre,
                                const iron_ir_type_t *full,
                                const int64_t *part) {
  for (int32_t d = 0; d < full->rank; ++d) {
    const iron_ir_value_t *sv = op->operands[first + (uint32_t)d];
    char var[40];
    snprintf(var, sizeof(var), "%s_s%d", pre, d);
    iron_cuda_emit_clamped_start(g->s, "    ", var, value_name(g, sv),
                                 sv->type->dtype, full->dims[d] - part[d]);
  }
}

// slice, transpose or dynamic_slice of a fusion input: one load at the
// element's coordinates mapped into the operand. The operand has another
// shape than the group (iron_cuda_fusable), so fuse.c never computes it
// inside the fusion; a computed operand is refused.
static iron_status_t gen_indexed_load(fusion_gen_t *g, const iron_ir_op_t *op,
                                      uint32_t index, const char *var) {
  const iron_ir_value_t *src = op->operands[0];
  const iron_ir_type_t *st = src->type, *rt = op->results[0].type;
  iron_op_kind_t k = op->kind;
  if (st->dtype != rt->dtype || st->rank != rt->rank)
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: operand and result differ in "
                    "dtype or rank",
                    op->name);
  // The load's coordinates: the group's, over the non-unit dims (fuse.c
  // lets a load to [1, A, B] join a group of shape [A, B] through a
  // reshape); size-1 dims are 0. A load that another reshape took to the
  // group's shape computes its own.
  char cn[IRON_MAX_RANK][16];
  if (!member_coords(g, rt, var, cn))
    return iron_ir_op_unimplemented(op, "in a CUDA fusion of another shape");
  int input = -1;
  for (uint32_t i = 0; i < g->f->num_inputs; ++i)
    if (g->f->inputs[i] == src) input = (int)i;
  if (input < 0)
    return iron_ir_op_unimplemented(op,
                                    "in a CUDA fusion of a computed "
                                    "value");
  const int32_t r = st->rank;
  int64_t istr[IRON_MAX_RANK];
  int64_t s = 1;
  for (int32_t d = r - 1; d >= 0; --d) {
    istr[d] = s;
    s *= st->dims[d];
  }
  int64_t a0[IRON_MAX_RANK], a1[IRON_MAX_RANK], a2[IRON_MAX_RANK];
  uint32_t n0 = 0, n1 = 0, n2 = 0;
  if (k == IRON_OP_SLICE) {
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_ir_op_i64_list(op, "start_indices", a0, IRON_MAX_RANK, &n0));
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_ir_op_i64_list(op, "strides", a2, IRON_MAX_RANK, &n2));
    if ((int32_t)n0 != r || (int32_t)n2 != r)
      return IRON_ERR(INVALID_ARGUMENT, "%s: attribute lengths", op->name);
  } else if (k == IRON_OP_TRANSPOSE) {
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_ir_op_i64_list(op, "permutation", a1, IRON_MAX_RANK, &n1));
    if ((int32_t)n1 != r)
      return IRON_ERR(INVALID_ARGUMENT, "%s: permutation length", op->name);
    for (int32_t d = 0; d < r; ++d)
      if (a1[d] < 0 || a1[d] >= r)
        return IRON_ERR(INVALID_ARGUMENT, "%s: bad permutation", op->name);
  } else {
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_ir_op_i64_list(op, "slice_sizes", a0, IRON_MAX_RANK, &n0));
    if ((int32_t)n0 != r || op->num_operands != 1 + (uint32_t)r)
      return IRON_ERR(INVALID_ARGUMENT, "%s: slice_sizes or start count",
                      op->name);
    for (int32_t d = 0; d < r; ++d) {
      const iron_ir_value_t *sv = op->operands[1 + d];
      if (!value_name(g, sv) || sv->type->rank != 0 ||
          !is_int(sv->type->dtype) || a0[d] < 0 || a0[d] > st->dims[d])
        return iron_ir_op_unimplemented(op,
                                        "in a CUDA fusion with start "
                                        "index %d of this kind",
                                        d);
    }
  }
  iron_cuda_text_t ix;
  iron_cuda_text_init(&ix);
  iron_cuda_text_printf(&ix, "0LL");
  if (k == IRON_OP_SLICE) {
    for (int32_t d = 0; d < r; ++d)
      iron_cuda_text_printf(
          &ix, " + ((long long)%s * %lldLL + %lldLL) * %lldLL", cn[d],
          (long long)a2[d], (long long)a0[d], (long long)istr[d]);
  } else if (k == IRON_OP_TRANSPOSE) {
    for (int32_t d = 0; d < r; ++d)
      iron_cuda_text_printf(&ix, " + (long long)%s * %lldLL", cn[d],
                            (long long)istr[a1[d]]);
  } else {
    emit_clamped_starts(g, op, 1, var, st, a0);
    for (int32_t d = 0; d < r; ++d)
      iron_cuda_text_printf(&ix, " + (%s_s%d + (long long)%s) * %lldLL", var, d,
                            cn[d], (long long)istr[d]);
  }
  char *ixs = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_text_finish(&ix, &ixs));
  size_t cap = strlen(ixs) + 32;
  char *lv = malloc(cap);
  if (!lv) {
    free(ixs);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory (fusion)");
  }
  snprintf(lv, cap, "in%d[%s]", input, ixs);
  free(ixs);
  emit_load(g->s, rt->dtype, var, lv);
  free(lv);
  return value_add(g, &op->results[0], "v%u", index);
}

// ---------------------------------------------------------------------------
// Members

// iota: the coordinate along its dimension (the group's, size-1 dims
// aside; an iota of one element is 0 in any group of one element).
static iron_status_t gen_iota(fusion_gen_t *g, const iron_ir_op_t *op,
                              const char *var) {
  const iron_ir_type_t *rt = op->results[0].type;
  iron_dtype_t out = rt->dtype;
  int64_t dim = 0;
  uint32_t n = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "iota_dimension", &dim, 1, &n));
  char cn[IRON_MAX_RANK][16];
  if (n != 1 || dim < 0 || dim >= rt->rank || !member_coords(g, rt, var, cn))
    return iron_ir_op_unimplemented(op, "in a CUDA fusion of another shape");
  iron_cuda_type_t ot = iron_cuda_type(out);
  // (f6: the host has no iota of them either, iron_shape_plan_iota_dtype_ok)
  if (!ot.store || ot.no_arith)
    return iron_ir_op_unimplemented(op, "on the CUDA device for dtype %s",
                                    iron_dtype_name(out));
  const char *c = cn[dim];
  char e[256];
  if (out == IRON_DTYPE_PRED) {
    snprintf(e, sizeof(e), "(%s != 0)", c);
  } else if (is_cplx(out)) {
    const char *R = out == IRON_DTYPE_C64 ? "float" : "double";
    snprintf(e, sizeof(e), "iron_mk((%s)%s, (%s)0, (%s *)0)", R, c, R, ot.comp);
  } else {
    snprintf(e, sizeof(e), "(%s)%s", ot.comp, c);
  }
  iron_cuda_emit_rounded(&g->sc, out, var, e);
  return IRON_OK;
}

// broadcast_in_dim: of an input, a load at the element's coordinates
// mapped into the input; of a computed value, that value where the
// broadcast keeps the linear order (or the value has one element).
static iron_status_t gen_broadcast(fusion_gen_t *g, const iron_ir_op_t *op,
                                   const char *var) {
  const iron_ir_type_t *rt = op->results[0].type;
  iron_dtype_t out = rt->dtype;
  int64_t rc = type_count(rt);
  if (op->num_operands != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: expected 1 operand", op->name);
  const iron_ir_value_t *src = op->operands[0];
  const iron_ir_type_t *st = src->type;
  if (st->dtype != out)
    return IRON_ERR(INVALID_ARGUMENT, "%s: dtype changes", op->name);
  int64_t bd[IRON_MAX_RANK];
  uint32_t nb = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "broadcast_dimensions", bd, IRON_MAX_RANK, &nb));
  if ((int32_t)nb != st->rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: broadcast_dimensions length",
                    op->name);
  for (uint32_t d = 0; d < nb; ++d) {
    if (bd[d] < 0 || bd[d] >= rt->rank ||
        (st->dims[d] != 1 && st->dims[d] != rt->dims[bd[d]]))
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad broadcast dimension %u",
                      op->name, d);
  }
  const char *sn = value_name(g, src);
  if (!sn)
    return IRON_ERR(INVALID_ARGUMENT, "%s: operand not in the fusion",
                    op->name);
  const char *comp = iron_cuda_type(out).comp;
  int64_t sc = type_count(st);
  int input = -1;
  for (uint32_t i = 0; i < g->f->num_inputs; ++i)
    if (g->f->inputs[i] == src) input = (int)i;
  bool in_order = sc == rc;  // only size-1 dims added: same linear order
  for (uint32_t d = 1; in_order && d < nb; ++d) in_order = bd[d] > bd[d - 1];
  if ((sc != 1 && in_order) || sc == 1) {
    if (input >= 0) {
      char lv[64];
      if (g->vec)
        snprintf(lv, sizeof(lv), "s%d", input);
      else
        snprintf(lv, sizeof(lv), sc == 1 ? "in%d[0]" : "in%d[i]", input);
      emit_load(g->s, out, var, lv);
    } else {
      iron_cuda_text_printf(g->s, "    const %s %s = %s;\n", comp, var, sn);
    }
    return IRON_OK;
  }
  if (!dims_equal(g, rt))
    return iron_ir_op_unimplemented(op, "in a CUDA fusion of another shape");
  if (input < 0) {
    // A computed value broadcast again: only the identity works without
    // recomputing it at other indices.
    bool identity = st->rank == rt->rank;
    for (uint32_t d = 0; identity && d < nb; ++d)
      identity = bd[d] == (int64_t)d && st->dims[d] == rt->dims[d];
    if (!identity)
      return iron_ir_op_unimplemented(op,
                                      "in a CUDA fusion of a computed value");
    iron_cuda_text_printf(g->s, "    const %s %s = %s;\n", comp, var, sn);
    return IRON_OK;
  }
  iron_cuda_text_t ix;
  iron_cuda_text_init(&ix);
  int64_t stride = 1;
  bool any = false;
  for (int32_t d = st->rank - 1; d >= 0; --d) {
    if (st->dims[d] != 1) {
      iron_cuda_text_printf(&ix, "%sc%lld * (%s)%lld", any ? " + " : "",
                            (long long)bd[d], g->idx, (long long)stride);
      any = true;
    }
    stride *= st->dims[d];
  }
  char *ixs = NULL;
  if (!any) iron_cuda_text_printf(&ix, "0");
  IRON_RETURN_IF_ERROR_PLAIN(iron_cuda_text_finish(&ix, &ixs));
  char lv[1200];
  snprintf(lv, sizeof(lv), "in%d[%s]", input, ixs);
  free(ixs);
  emit_load(g->s, out, var, lv);
  return IRON_OK;
}

static iron_status_t gen_op(fusion_gen_t *g, const iron_ir_op_t *op,
                            uint32_t index) {
  iron_op_kind_t k = op->kind;
  if (!iron_cuda_fusion_op_supported(k))
    return iron_ir_op_unimplemented(op, "inside a CUDA element-wise kernel");
  if (op->num_results != 1 || !op->results[0].type ||
      op->results[0].type->kind != IRON_TYPE_TENSOR ||
      !iron_ir_type_is_static(op->results[0].type))
    return iron_ir_op_unimplemented(op, "on the CUDA device for this type");
  for (uint32_t i = 0; i < op->num_operands; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (!t || t->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t))
      return iron_ir_op_unimplemented(op, "on the CUDA device for this type");
  }
  const iron_ir_type_t *rt = op->results[0].type;
  int64_t rc = type_count(rt);
  if (rc != g->count && rc != 1)
    return IRON_ERR(INVALID_ARGUMENT,
                    "%s: %lld elements in a fusion of %lld elements", op->name,
                    (long long)rc, (long long)g->count);
  if (!iron_cuda_type(rt->dtype).store)
    return iron_ir_op_unimplemented(op, "on the CUDA device for dtype %s",
                                    iron_dtype_name(rt->dtype));
  char var[24];
  snprintf(var, sizeof(var), "v%u", index);
  iron_status_t st;
  if (iron_cuda_fusion_is_indexed_load(k)) {
    st = gen_indexed_load(g, op, index, var);
    return st;  // registers the value itself
  }
  if (k == IRON_OP_IOTA) {
    st = gen_iota(g, op, var);
  } else if (k == IRON_OP_BROADCAST_IN_DIM) {
    st = gen_broadcast(g, op, var);
  } else {
    // Element-wise: operands of the element's count or one element.
    const char *args[3] = {NULL, NULL, NULL};
    if (op->num_operands > 3)
      return IRON_ERR(INVALID_ARGUMENT, "%s: %u operands", op->name,
                      op->num_operands);
    for (uint32_t i = 0; i < op->num_operands; ++i) {
      int64_t c = type_count(op->operands[i]->type);
      if (c != rc && c != 1)
        return IRON_ERR(INVALID_ARGUMENT,
                        "%s: operand %u has %lld elements, result %lld",
                        op->name, i, (long long)c, (long long)rc);
      args[i] = value_name(g, op->operands[i]);
      if (!args[i])
        return IRON_ERR(INVALID_ARGUMENT,
                        "%s: operand %u is neither a fusion input nor "
                        "defined earlier in the fusion",
                        op->name, i);
    }
    st = iron_cuda_scalar_emit(&g->sc, op, args, var);
  }
  if (st) return st;
  return value_add(g, &op->results[0], "v%u", index);
}

static bool vectorize_math_enabled(void) {
  const char *e = getenv("IRON_CUDA_VECTORIZE_MATH");
  return !(e && strcmp(e, "0") == 0);
}

// A broadcast that reads its operand at the element's linear index (one
// element, or only size-1 dims added: the same linear order), as
// gen_broadcast emits it without coordinates.
static bool broadcast_is_linear(const iron_ir_op_t *op) {
  if (op->num_operands != 1) return false;
  const iron_ir_type_t *st = op->operands[0]->type;
  const iron_ir_type_t *rt = op->results[0].type;
  int64_t sc = type_count(st);
  if (sc == 1) return true;
  if (sc != type_count(rt)) return false;
  int64_t bd[IRON_MAX_RANK];
  uint32_t nb = 0;
  iron_status_t e =
      iron_ir_op_i64_list(op, "broadcast_dimensions", bd, IRON_MAX_RANK, &nb);
  if (e) {
    iron_status_free(e);
    return false;
  }
  for (uint32_t d = 1; d < nb; ++d)
    if (bd[d] <= bd[d - 1]) return false;
  return true;
}

// Whether the vector kernel cannot run the fusion: an op needs the
// element's coordinates (iron_cuda_fusion_needs_coords) other than a
// linear broadcast (a scalar constant broadcast: 1 / (1 + exp(-x))).
static bool vec_needs_coords(const iron_cuda_fusion_t *f) {
  for (uint32_t i = 0; i < f->num_ops; ++i) {
    const iron_ir_op_t *op = f->ops[i];
    if (op->kind == IRON_OP_BROADCAST_IN_DIM) {
      if (!broadcast_is_linear(op)) return true;
      continue;
    }
    if (op->kind == IRON_OP_IOTA || op->kind == IRON_OP_DYNAMIC_UPDATE_SLICE ||
        iron_cuda_fusion_is_indexed_load(op->kind))
      return true;
  }
  return false;
}

// Vector width class of a fusion: 0 no vector kernel (complex values,
// more than 16 ops), 1 cheap ops (memory-bound: full 16-byte vectors), 2
// ops that compute much (transcendentals): vectors of at most 4 elements,
// which still give 2-byte dtypes 8-byte accesses and several loads in
// flight per thread, at 4 inlined copies of the math instead of 8
// (IRON_CUDA_VECTORIZE_MATH=0: none, one element per thread as before).
static int fusion_vec_class(const iron_cuda_fusion_t *f) {
  int cls = 1;
  for (uint32_t i = 0; i < f->num_ops; ++i) {
    const iron_ir_op_t *op = f->ops[i];
    for (uint32_t r = 0; r < op->num_results; ++r) {
      if (op->results[r].type && is_cplx(op->results[r].type->dtype)) {
        return 0;
      }
    }
    switch (op->kind) {
      case IRON_OP_ADD:
      case IRON_OP_SUBTRACT:
      case IRON_OP_MULTIPLY:
      case IRON_OP_DIVIDE:
      case IRON_OP_MAXIMUM:
      case IRON_OP_MINIMUM:
      case IRON_OP_NEGATE:
      case IRON_OP_ABS:
      case IRON_OP_SIGN:
      case IRON_OP_AND:
      case IRON_OP_OR:
      case IRON_OP_XOR:
      case IRON_OP_NOT:
      case IRON_OP_SHIFT_LEFT:
      case IRON_OP_SHIFT_RIGHT_ARITHMETIC:
      case IRON_OP_SHIFT_RIGHT_LOGICAL:
      case IRON_OP_COMPARE:
      case IRON_OP_SELECT:
      case IRON_OP_CLAMP:
      case IRON_OP_CONVERT:
      case IRON_OP_CONSTANT:
      case IRON_OP_RESHAPE:
      case IRON_OP_SQRT:
      case IRON_OP_RSQRT:
      case IRON_OP_FLOOR:
      case IRON_OP_CEIL:
      case IRON_OP_ROUND_NEAREST_EVEN:
      case IRON_OP_ROUND_NEAREST_AFZ:
      case IRON_OP_EXPONENTIAL:
      case IRON_OP_LOGISTIC:
      case IRON_OP_IS_FINITE:
      case IRON_OP_REAL:
      case IRON_OP_IMAG:
      case IRON_OP_BROADCAST_IN_DIM:
        break;
      default:
        if (!iron_cuda_scalar_op_supported(op->kind)) return 0;
        cls = 2;
        break;
    }
  }
  for (uint32_t i = 0; i < f->num_inputs; ++i) {
    if (f->inputs[i]->type && is_cplx(f->inputs[i]->type->dtype)) return 0;
  }
  if (f->num_ops > 16) return 0;
  if (cls == 2 && !vectorize_math_enabled()) return 0;
  return cls;
}

// ---------------------------------------------------------------------------
// Pivot transposes (cuda_fusion_plan.h): phase 1 computes the pivots'
// operands at the operand's coordinates, phase 2 the rest at the space's.

// Whether input i is read at the element's index (or at 0) in `phase`.
static bool phase_reads_input(const iron_cuda_fusion_t *f,
                              const iron_cuda_fusion_pivots_t *pv, int phase,
                              uint32_t i) {
  const iron_ir_value_t *v = f->inputs[i];
  for (uint32_t j = 0; j < f->num_outputs; ++j)
    if (f->outputs[j] == v && pv->out_phase[j] == phase) return true;
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *op = f->ops[o];
    bool pivot = iron_cuda_fusion_is_pivot(pv, o);
    // A pivot's operand is read in phase 1 (its result in phase 2).
    if (pivot) {
      if (phase == 1 && op->operands[0] == v) return true;
      continue;
    }
    if (!(pv->phase[o] & phase) || op->kind == IRON_OP_BROADCAST_IN_DIM)
      continue;
    uint32_t first = iron_cuda_fusion_is_indexed_load(op->kind) ? 1 : 0;
    for (uint32_t k = first; k < op->num_operands; ++k)
      if (op->operands[k] == v) return true;
  }
  return false;
}

static bool phase_needs_coords(const iron_cuda_fusion_t *f,
                               const iron_cuda_fusion_pivots_t *pv,
                               int phase) {
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    iron_op_kind_t k = f->ops[o]->kind;
    if (!(pv->phase[o] & phase) || iron_cuda_fusion_is_pivot(pv, o)) continue;
    if (k == IRON_OP_BROADCAST_IN_DIM || k == IRON_OP_IOTA ||
        iron_cuda_fusion_is_indexed_load(k))
      return true;
  }
  return false;
}

// Emits, inside a block where `i` is the element's linear index in the
// phase's space (t), the phase's members and its outputs' stores. Phase
// 2 reads pivot j's value from pexpr[j] (a storage lvalue: the tile; or a
// compute-type local when `pexpr_comp`). Phase 1 ends with pset[j] =
// pivot j's operand (storage when `pset_store`, else compute type).
// elem >= 0 (element elem of a thread's pair): inputs of the space's
// count are read from a<input>_<elem> and outputs written to
// o<output>_<elem>, storage locals the caller loads and stores as pairs.
static iron_status_t emit_phase(fusion_gen_t *g,
                                const iron_cuda_fusion_pivots_t *pv,
                                int phase, const iron_ir_type_t *t,
                                char pexpr[][64], bool pexpr_comp,
                                char pset[][64], bool pset_store, int elem) {
  const iron_cuda_fusion_t *f = g->f;
  g->rank = t->rank;
  memcpy(g->dims, t->dims, sizeof(int64_t) * (size_t)t->rank);
  uint32_t saved = g->num_vals;
  iron_status_t st = IRON_OK;
  if (phase_needs_coords(f, pv, phase) && g->rank > 0) {
    iron_cuda_text_printf(g->s, "    %s r_ = (%s)i;\n", g->idx, g->idx);
    for (int32_t d = g->rank - 1; d >= 0; --d) {
      iron_cuda_text_printf(g->s, "    const %s c%d = r_ %% (%s)%lld;\n",
                            g->idx, d, g->idx, (long long)g->dims[d]);
      if (d)
        iron_cuda_text_printf(g->s, "    r_ /= (%s)%lld;\n", g->idx,
                              (long long)g->dims[d]);
    }
  }
  const char *pre = phase == 1 ? "y%u" : "x%u";
  for (uint32_t i = 0; i < f->num_inputs; ++i) {
    const iron_ir_value_t *v = f->inputs[i];
    if (phase_reads_input(f, pv, phase, i)) {
      int64_t c = type_count(v->type);
      if (c != 1 && c != g->count)
        return IRON_ERR(INVALID_ARGUMENT,
                        "CUDA fusion: input %u has %lld elements, the fusion "
                        "%lld",
                        i, (long long)c, (long long)g->count);
      char name[24], lv[64];
      snprintf(name, sizeof(name), pre, i);
      if (c != 1 && elem >= 0)
        snprintf(lv, sizeof(lv), "a%u_%d", i, elem);
      else
        snprintf(lv, sizeof(lv), c == 1 ? "in%u[0]" : "in%u[i]", i);
      emit_load(g->s, v->type->dtype, name, lv);
    }
    IRON_RETURN_IF_ERROR_PLAIN(value_add(g, v, pre, i));
  }
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    const iron_ir_op_t *op = f->ops[o];
    if (!(pv->phase[o] & phase)) continue;
    if (iron_cuda_fusion_is_pivot(pv, o)) {
      uint32_t j = 0;
      while (pv->op[j] != o) ++j;
      char var[24];
      snprintf(var, sizeof(var), "v%u", o);
      iron_dtype_t dt = op->results[0].type->dtype;
      if (pexpr_comp)
        iron_cuda_text_printf(g->s, "    const %s %s = %s;\n",
                              iron_cuda_type(dt).comp, var, pexpr[j]);
      else
        emit_load(g->s, dt, var, pexpr[j]);
      IRON_RETURN_IF_ERROR_PLAIN(value_add(g, &op->results[0], "v%u", o));
      continue;
    }
    // A member computed in both phases has the space's dims in both (a
    // square transpose's operand) or one element.
    if (pv->phase[o] == 3 && type_count(op->results[0].type) != 1 &&
        !dims_equal(g, op->results[0].type))
      return iron_ir_op_unimplemented(op,
                                      "in a CUDA fusion on both sides of a "
                                      "transpose");
    IRON_RETURN_IF_ERROR_PLAIN(gen_op(g, op, o));
  }
  if (phase == 1) {
    for (uint32_t j = 0; j < pv->num; ++j) {
      const iron_ir_value_t *src = f->ops[pv->op[j]]->operands[0];
      const char *n = value_name(g, src);
      if (!n)
        return IRON_ERR(INVALID_ARGUMENT, "CUDA fusion: pivot %u operand",
                        j);
      int input = -1;
      for (uint32_t u = 0; u < f->num_inputs; ++u)
        if (f->inputs[u] == src && type_count(src->type) == g->count)
          input = (int)u;
      if (pset_store && input >= 0) {
        // An input's storage bits go to the tile as they are (as the
        // unfused transpose moves them).
        if (elem >= 0)
          iron_cuda_text_printf(g->s, "    %s = a%d_%d;\n", pset[j], input,
                                elem);
        else
          iron_cuda_text_printf(g->s, "    %s = in%d[i];\n", pset[j], input);
      } else if (pset_store) {
        char se[512];
        iron_cuda_store_expr(src->type->dtype, n, se, sizeof(se));
        iron_cuda_text_printf(g->s, "    %s = %s;\n", pset[j], se);
      } else {
        iron_cuda_text_printf(g->s, "    %s = %s;\n", pset[j], n);
      }
    }
  }
  for (uint32_t j = 0; j < f->num_outputs; ++j) {
    if (pv->out_phase[j] != phase) continue;
    if (iron_cuda_fusion_dus_root(f, j))
      return iron_ir_op_unimplemented(f->outputs[j]->def_op,
                                      "in a CUDA fusion with a transpose");
    const char *n = value_name(g, f->outputs[j]);
    if (!n)
      return IRON_ERR(INVALID_ARGUMENT, "CUDA fusion: output %u not defined",
                      j);
    char se[512];
    iron_cuda_store_expr(f->outputs[j]->type->dtype, n, se, sizeof(se));
    // A pivot's value from the tile: its storage bits as they are (as the
    // unfused transpose copies them).
    for (uint32_t q = 0; q < pv->num && !pexpr_comp; ++q)
      if (f->outputs[j] == &f->ops[pv->op[q]]->results[0])
        snprintf(se, sizeof(se), "%s", pexpr[q]);
    if (elem >= 0)
      iron_cuda_text_printf(g->s, "    o%u_%d = %s;\n", j, elem, se);
    else
      iron_cuda_text_printf(g->s, "    out%u[i] = %s;\n", j, se);
  }
  g->num_vals = saved;  // the phase's names end with its block
  return st;
}

// Loads (phase 1) or declares the pair locals of the phase's inputs of
// the space's count, and declares its outputs' pair locals.
static void pair_locals(fusion_gen_t *g, const iron_cuda_fusion_pivots_t *pv,
                        int phase) {
  const iron_cuda_fusion_t *f = g->f;
  for (uint32_t u = 0; u < f->num_inputs; ++u) {
    const iron_ir_type_t *t = f->inputs[u]->type;
    if (type_count(t) == 1 || !phase_reads_input(f, pv, phase, u)) continue;
    const char *ct = st_ctype(t->dtype);
    iron_cuda_text_printf(g->s,
                          "    %s a%u_0, a%u_1;\n"
                          "    if (al_) {\n"
                          "      const iron_vec<%s, 2> p_ = "
                          "*(const iron_vec<%s, 2> *)(in%u + i0_);\n"
                          "      a%u_0 = p_.v[0]; a%u_1 = p_.v[1];\n"
                          "    } else {\n"
                          "      a%u_0 = in%u[i0_]; a%u_1 = in%u[i0_ + 1];\n"
                          "    }\n",
                          ct, u, u, ct, ct, u, u, u, u, u, u, u);
  }
  for (uint32_t j = 0; j < f->num_outputs; ++j)
    if (pv->out_phase[j] == phase)
      iron_cuda_text_printf(g->s, "    %s o%u_0, o%u_1;\n",
                            st_ctype(f->outputs[j]->type->dtype), j, j);
}

static void pair_stores(fusion_gen_t *g, const iron_cuda_fusion_pivots_t *pv,
                        int phase) {
  const iron_cuda_fusion_t *f = g->f;
  for (uint32_t j = 0; j < f->num_outputs; ++j) {
    if (pv->out_phase[j] != phase) continue;
    const char *ct = st_ctype(f->outputs[j]->type->dtype);
    iron_cuda_text_printf(g->s,
                          "    if (al_) {\n"
                          "      iron_vec<%s, 2> p_; p_.v[0] = o%u_0; "
                          "p_.v[1] = o%u_1;\n"
                          "      *(iron_vec<%s, 2> *)(out%u + i0_) = p_;\n"
                          "    } else {\n"
                          "      out%u[i0_] = o%u_0; out%u[i0_ + 1] = o%u_1;\n"
                          "    }\n",
                          ct, j, j, ct, j, j, j, j, j);
  }
}

// The tiled kernel for pivots of 1- or 2-byte elements (tp->pairs): 64x64
// tiles, each thread moving two adjacent elements along the contiguous
// dim of each side, so that its loads and stores of inputs and outputs
// are pairs (4 bytes and up) where the pointers are aligned (checked at
// run time; both tile dims are even, so pairs never straddle a row). The
// tile's row pitch of 65 elements keeps phase 2's column reads on
// distinct banks.
static iron_status_t gen_pivot_pairs(fusion_gen_t *g,
                                     const iron_cuda_fusion_pivots_t *pv,
                                     const iron_ir_type_t *space,
                                     const iron_cuda_fusion_tile_t *tp) {
  const iron_cuda_fusion_t *f = g->f;
  iron_cuda_text_t *s = g->s;
  const char *I = g->idx;
  iron_dtype_t dt = pv->in->dtype;
  int32_t k = tp->k, L = tp->rank - 1;
  int64_t nk = (tp->dims[k] + 63) / 64, nl = (tp->dims[L] + 63) / 64;
  char pexpr[2][IRON_CUDA_MAX_PIVOTS][64], pset[2][IRON_CUDA_MAX_PIVOTS][64];
  for (uint32_t j = 0; j < pv->num; ++j) {
    iron_cuda_text_printf(s, "  __shared__ %s t%u_[64][65];\n", st_ctype(dt),
                          j);
    for (int e = 0; e < 2; ++e) {
      snprintf(pset[e][j], sizeof(pset[e][j]), "t%u_[ty_ + j_][2 * tx_ + %d]",
               j, e);
      snprintf(pexpr[e][j], sizeof(pexpr[e][j]),
               "t%u_[2 * tx_ + %d][ty_ + j_]", j, e);
    }
  }
  iron_cuda_text_printf(s, "  bool al_ = true;\n");
  for (uint32_t u = 0; u < f->num_inputs; ++u)
    if (type_count(f->inputs[u]->type) != 1)
      iron_cuda_text_printf(s,
                            "  al_ = al_ && ((unsigned long long)in%u %% "
                            "(2 * sizeof(*in%u))) == 0;\n",
                            u, u);
  for (uint32_t j = 0; j < f->num_outputs; ++j)
    iron_cuda_text_printf(s,
                          "  al_ = al_ && ((unsigned long long)out%u %% "
                          "(2 * sizeof(*out%u))) == 0;\n",
                          j, j);
  iron_cuda_text_printf(s,
                        "  %s b_ = blockIdx.x;\n"
                        "  const %s tl_ = b_ %% %lldLL; b_ /= %lldLL;\n"
                        "  const %s tk_ = b_ %% %lldLL; b_ /= %lldLL;\n"
                        "  %s sb_ = 0, ob_ = 0;\n",
                        I, I, (long long)nl, (long long)nl, I, (long long)nk,
                        (long long)nk, I);
  for (int32_t d = tp->rank - 1; d >= 0; --d) {
    if (d == k || d == L) continue;
    iron_cuda_text_printf(s,
                          "  { const %s c_ = b_ %% %lldLL; b_ /= %lldLL; "
                          "sb_ += c_ * %lldLL; ob_ += c_ * %lldLL; }\n",
                          I, (long long)tp->dims[d], (long long)tp->dims[d],
                          (long long)tp->src_strides[d],
                          (long long)tp->out_strides[d]);
  }
  iron_cuda_text_printf(
      s,
      "  const int tx_ = threadIdx.x & 31, ty_ = threadIdx.x >> 5;\n"
      "  for (int j_ = 0; j_ < 64; j_ += 8) {\n"
      "    const %s kk_ = tk_ * 64 + 2 * tx_, ll_ = tl_ * 64 + ty_ + j_;\n"
      "    if (kk_ >= %lldLL || ll_ >= %lldLL) continue;\n"
      "    const %s i0_ = sb_ + kk_ + ll_ * %lldLL;\n",
      I, (long long)tp->dims[k], (long long)tp->dims[L], I,
      (long long)tp->src_strides[L]);
  pair_locals(g, pv, 1);
  for (int e = 0; e < 2; ++e) {
    iron_cuda_text_printf(s, "    {\n    const %s i = i0_ + %d;\n", I, e);
    IRON_RETURN_IF_ERROR_PLAIN(
        emit_phase(g, pv, 1, pv->in, pexpr[e], false, pset[e], true, e));
    iron_cuda_text_printf(s, "    }\n");
  }
  pair_stores(g, pv, 1);
  iron_cuda_text_printf(
      s,
      "  }\n"
      "  __syncthreads();\n"
      "  for (int j_ = 0; j_ < 64; j_ += 8) {\n"
      "    const %s ll_ = tl_ * 64 + 2 * tx_, kk_ = tk_ * 64 + ty_ + j_;\n"
      "    if (kk_ >= %lldLL || ll_ >= %lldLL) continue;\n"
      "    const %s i0_ = ob_ + kk_ * %lldLL + ll_;\n",
      I, (long long)tp->dims[k], (long long)tp->dims[L], I,
      (long long)tp->out_strides[k]);
  pair_locals(g, pv, 2);
  for (int e = 0; e < 2; ++e) {
    iron_cuda_text_printf(s, "    {\n    const %s i = i0_ + %d;\n", I, e);
    IRON_RETURN_IF_ERROR_PLAIN(
        emit_phase(g, pv, 2, space, pexpr[e], false, pset[e], false, e));
    iron_cuda_text_printf(s, "    }\n");
  }
  pair_stores(g, pv, 2);
  iron_cuda_text_printf(s, "  }\n}\n");
  return IRON_OK;
}

// The kernel of a fusion with pivots: over 32x32 tiles of the pivots'
// (source-contiguous, result-contiguous) dims when the planner tiles them
// (loads coalesced along the source, stores along the result), else one
// thread per element computing phase 1 at its source element.
static iron_status_t gen_pivot_kernel(fusion_gen_t *g,
                                      const iron_cuda_fusion_pivots_t *pv,
                                      const iron_ir_type_t *space) {
  const iron_cuda_fusion_t *f = g->f;
  iron_cuda_text_t *s = g->s;
  iron_cuda_fusion_tile_t tp;
  iron_cuda_fusion_tile_plan(pv, &tp);
  iron_cuda_text_printf(
      s, "extern \"C\" __global__ void __launch_bounds__(256) %s(",
      IRON_CUDA_KERNEL_PLACEHOLDER);
  for (uint32_t i = 0; i < f->num_inputs; ++i)
    iron_cuda_text_printf(s, "%sconst %s *in%u", i ? ", " : "",
                          st_ctype(f->inputs[i]->type->dtype), i);
  for (uint32_t j = 0; j < f->num_outputs; ++j)
    iron_cuda_text_printf(s, "%s%s *out%u", (f->num_inputs || j) ? ", " : "",
                          st_ctype(f->outputs[j]->type->dtype), j);
  iron_cuda_text_printf(s, ") {\n");
  const char *I = g->idx;
  char pexpr[IRON_CUDA_MAX_PIVOTS][64], pset[IRON_CUDA_MAX_PIVOTS][64];
  iron_dtype_t dt = pv->in->dtype;
  if (tp.k >= 0 && tp.pairs) return gen_pivot_pairs(g, pv, space, &tp);
  if (tp.k >= 0) {
    int32_t k = tp.k, L = tp.rank - 1;
    int64_t nk = (tp.dims[k] + 31) / 32, nl = (tp.dims[L] + 31) / 32;
    for (uint32_t j = 0; j < pv->num; ++j) {
      iron_cuda_text_printf(s, "  __shared__ %s t%u_[32][33];\n", st_ctype(dt),
                            j);
      snprintf(pset[j], sizeof(pset[j]), "t%u_[ty_ + j_][tx_]", j);
      snprintf(pexpr[j], sizeof(pexpr[j]), "t%u_[tx_][ty_ + j_]", j);
    }
    iron_cuda_text_printf(s,
                          "  %s b_ = blockIdx.x;\n"
                          "  const %s tl_ = b_ %% %lldLL; b_ /= %lldLL;\n"
                          "  const %s tk_ = b_ %% %lldLL; b_ /= %lldLL;\n"
                          "  %s sb_ = 0, ob_ = 0;\n",
                          I, I, (long long)nl, (long long)nl, I, (long long)nk,
                          (long long)nk, I);
    for (int32_t d = tp.rank - 1; d >= 0; --d) {
      if (d == k || d == L) continue;
      iron_cuda_text_printf(s,
                            "  { const %s c_ = b_ %% %lldLL; b_ /= %lldLL; "
                            "sb_ += c_ * %lldLL; ob_ += c_ * %lldLL; }\n",
                            I, (long long)tp.dims[d], (long long)tp.dims[d],
                            (long long)tp.src_strides[d],
                            (long long)tp.out_strides[d]);
    }
    iron_cuda_text_printf(
        s,
        "  const int tx_ = threadIdx.x & 31, ty_ = threadIdx.x >> 5;\n"
        "  for (int j_ = 0; j_ < 32; j_ += 8) {\n"
        "    const %s kk_ = tk_ * 32 + tx_, ll_ = tl_ * 32 + ty_ + j_;\n"
        "    if (kk_ >= %lldLL || ll_ >= %lldLL) continue;\n"
        "    const %s i = sb_ + kk_ + ll_ * %lldLL;\n",
        I, (long long)tp.dims[k], (long long)tp.dims[L], I,
        (long long)tp.src_strides[L]);
    IRON_RETURN_IF_ERROR_PLAIN(
        emit_phase(g, pv, 1, pv->in, pexpr, false, pset, true, -1));
    iron_cuda_text_printf(
        s,
        "  }\n"
        "  __syncthreads();\n"
        "  for (int j_ = 0; j_ < 32; j_ += 8) {\n"
        "    const %s ll_ = tl_ * 32 + tx_, kk_ = tk_ * 32 + ty_ + j_;\n"
        "    if (kk_ >= %lldLL || ll_ >= %lldLL) continue;\n"
        "    const %s i = ob_ + kk_ * %lldLL + ll_;\n",
        I, (long long)tp.dims[k], (long long)tp.dims[L], I,
        (long long)tp.out_strides[k]);
    IRON_RETURN_IF_ERROR_PLAIN(
        emit_phase(g, pv, 2, space, pexpr, false, pset, false, -1));
    iron_cuda_text_printf(s, "  }\n}\n");
    return IRON_OK;
  }
  // One thread per element: its source element from the pivots' result
  // coordinates (the result is read by linear index: a reshape after the
  // pivot keeps the order).
  iron_cuda_text_printf(s, "  IRON_LOOP(o_, %s, %lldLL) {\n", I,
                        (long long)g->count);
  for (uint32_t j = 0; j < pv->num; ++j) {
    iron_cuda_text_printf(s, "    %s p%u_;\n", iron_cuda_type(dt).comp, j);
    snprintf(pset[j], sizeof(pset[j]), "p%u_", j);
    snprintf(pexpr[j], sizeof(pexpr[j]), "p%u_", j);
  }
  iron_cuda_text_printf(s, "    %s s_ = 0, q_ = o_;\n", I);
  for (int32_t d = tp.rank - 1; d >= 0; --d)
    iron_cuda_text_printf(s,
                          "    s_ += (q_ %% (%s)%lldLL) * (%s)%lldLL; "
                          "q_ /= (%s)%lldLL;\n",
                          I, (long long)tp.dims[d], I,
                          (long long)tp.src_strides[d], I,
                          (long long)tp.dims[d]);
  iron_cuda_text_printf(s, "    {\n    const %s i = s_;\n", I);
  IRON_RETURN_IF_ERROR_PLAIN(
      emit_phase(g, pv, 1, pv->in, pexpr, true, pset, false, -1));
  iron_cuda_text_printf(s, "    }\n    {\n    const %s i = o_;\n", I);
  IRON_RETURN_IF_ERROR_PLAIN(
      emit_phase(g, pv, 2, space, pexpr, true, pset, false, -1));
  iron_cuda_text_printf(s, "    }\n  }\n}\n");
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// The kernel

iron_status_t iron_cuda_codegen_fusion(const iron_cuda_fusion_t *f,
                                       char **out_source, char **out_name) {
  const iron_ir_op_t *owner = f->owner     ? f->owner
                              : f->num_ops ? f->ops[0]
                                           : NULL;
  if (f->num_outputs == 0) {
    return IRON_ERR(INVALID_ARGUMENT, "CUDA fusion without outputs");
  }
  const iron_ir_type_t *t0 = iron_cuda_fusion_space(f);
  if (!t0 || t0->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t0)) {
    return owner ? iron_ir_op_unimplemented(owner,
                                            "on the CUDA device for "
                                            "a non-static result")
                 : IRON_ERR(UNIMPLEMENTED, "non-static fusion result");
  }
  fusion_gen_t g;
  memset(&g, 0, sizeof(g));
  g.f = f;
  g.rank = t0->rank;
  memcpy(g.dims, t0->dims, sizeof(int64_t) * (size_t)t0->rank);
  g.count = type_count(t0);
  if (g.count < 0) {
    return IRON_ERR(INVALID_ARGUMENT, "CUDA fusion: result too large");
  }
  g.idx = g.count <= ((int64_t)1 << 30) ? "int" : "long long";
  iron_cuda_text_t body;
  iron_cuda_text_init(&body);
  g.sc.t = &body;
  g.sc.indent = "    ";
  g.sc.mode = IRON_CUDA_SCALAR_ELEMENTWISE;
  g.sc.flush = iron_cuda_flush_denormals();
  g.s = &body;
  iron_status_t st = IRON_OK;

  // Types first (refusals), then the vector width: kernels without
  // coordinates (no broadcast/iota) move V elements per thread with one
  // vector load/store per operand (16 bytes for the widest element).
  size_t widest = 1;
  for (uint32_t i = 0; i < f->num_inputs; ++i) {
    const iron_ir_type_t *t = f->inputs[i]->type;
    const char *ct = t ? st_ctype(t->dtype) : NULL;
    if (!ct || t->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t)) {
      st = owner ? iron_ir_op_unimplemented(
                       owner, "on the CUDA device for input dtype %s",
                       t ? iron_dtype_name(t->dtype) : "?")
                 : IRON_ERR(UNIMPLEMENTED, "CUDA fusion input type");
      goto fail;
    }
    if (type_count(t) == g.count && iron_dtype_size(t->dtype) > widest)
      widest = iron_dtype_size(t->dtype);
  }
  for (uint32_t j = 0; j < f->num_outputs; ++j) {
    const iron_ir_type_t *t = f->outputs[j]->type;
    const char *ct = t ? st_ctype(t->dtype) : NULL;
    if (!ct) {
      st = owner ? iron_ir_op_unimplemented(
                       owner, "on the CUDA device for result dtype %s",
                       t ? iron_dtype_name(t->dtype) : "?")
                 : IRON_ERR(UNIMPLEMENTED, "CUDA fusion output type");
      goto fail;
    }
    if (type_count(t) != g.count && !iron_cuda_fusion_dus_root(f, j)) {
      st = IRON_ERR(INVALID_ARGUMENT,
                    "CUDA fusion: outputs have different element counts");
      goto fail;
    }
    if (iron_dtype_size(t->dtype) > widest) widest = iron_dtype_size(t->dtype);
  }
  if (!f->device_fn) {
    iron_cuda_fusion_pivots_t pv;
    st = iron_cuda_fusion_pivots_plan(f, &pv);
    if (st) goto fail;
    if (pv.num) {
      st = gen_pivot_kernel(&g, &pv, t0);
      iron_cuda_fusion_pivots_free(&pv);
      if (st) goto fail;
      free(g.vals);
      return iron_cuda_source_make(&body, "iron_ew", out_source, out_name);
    }
  }
  int vw = (int)(16 / widest);
  if (vw > 8) vw = 8;
  bool any_narrow = false;
  for (uint32_t i = 0; i < f->num_inputs; ++i)
    any_narrow = any_narrow || is_narrow(f->inputs[i]->type->dtype);
  for (uint32_t j = 0; j < f->num_outputs; ++j)
    any_narrow = any_narrow || is_narrow(f->outputs[j]->type->dtype);
  int vcls = fusion_vec_class(f);
  if (vcls == 2 && vw > 4) vw = 4;
  bool vec = vw >= 2 && vcls > 0 && !vec_needs_coords(f) && g.count >= 4 * vw &&
             iron_cuda_vectorize_enabled() && !any_narrow && !f->device_fn;
  g.vec = vec;

  if (f->device_fn) {
    iron_cuda_text_printf(&body, "static __device__ __forceinline__ void %s(",
                          f->device_fn);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      iron_cuda_text_printf(&body, "const %s *in%u, ",
                            iron_cuda_ctype(f->inputs[i]->type->dtype), i);
    }
    iron_cuda_text_printf(&body, "long long i");
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_text_printf(&body, ", %s &r%u",
                            iron_cuda_type(f->outputs[j]->type->dtype).comp, j);
    }
    iron_cuda_text_printf(&body, ") {\n  {\n");
  } else if (vec) {
    // The element function: storage values in, storage values out.
    iron_cuda_text_printf(&body, "static __device__ __forceinline__ void %s_f(",
                          IRON_CUDA_KERNEL_PLACEHOLDER);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      iron_cuda_text_printf(&body, "%sconst %s s%u", i ? ", " : "",
                            st_ctype(f->inputs[i]->type->dtype), i);
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_text_printf(&body, "%s%s &r%u",
                            (f->num_inputs || j) ? ", " : "",
                            st_ctype(f->outputs[j]->type->dtype), j);
    }
    iron_cuda_text_printf(&body, ") {\n  {\n");
  } else {
    iron_cuda_text_printf(
        &body, "extern \"C\" __global__ void __launch_bounds__(256) %s(",
        IRON_CUDA_KERNEL_PLACEHOLDER);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      iron_cuda_text_printf(&body, "%sconst %s *in%u", i ? ", " : "",
                            st_ctype(f->inputs[i]->type->dtype), i);
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_text_printf(&body, "%s%s *out%u",
                            (f->num_inputs || j) ? ", " : "",
                            st_ctype(f->outputs[j]->type->dtype), j);
    }
    iron_cuda_text_printf(&body, ") {\n  IRON_LOOP(i, %s, %lldLL) {\n", g.idx,
                          (long long)g.count);
  }
  if (!vec && iron_cuda_fusion_needs_coords(f) && g.rank > 0) {
    iron_cuda_text_printf(&body, "    %s r_ = (%s)i;\n", g.idx, g.idx);
    for (int32_t d = g.rank - 1; d >= 0; --d) {
      iron_cuda_text_printf(&body, "    const %s c%d = r_ %% (%s)%lld;\n",
                            g.idx, d, g.idx, (long long)g.dims[d]);
      if (d) {
        iron_cuda_text_printf(&body, "    r_ /= (%s)%lld;\n", g.idx,
                              (long long)g.dims[d]);
      }
    }
  }
  // Direct loads of inputs.
  for (uint32_t i = 0; i < f->num_inputs; ++i) {
    const iron_ir_value_t *v = f->inputs[i];
    char name[24];
    snprintf(name, sizeof(name), "x%u", i);
    if (iron_cuda_fusion_reads_input(f, i)) {
      int64_t c = type_count(v->type);
      char lv[64];
      if (c != 1 && c != g.count) {
        st = IRON_ERR(INVALID_ARGUMENT,
                      "CUDA fusion: input %u has %lld elements, the fusion "
                      "%lld",
                      i, (long long)c, (long long)g.count);
        goto fail;
      }
      // Same count with other dims: element-wise ops see one linear order.
      if (vec) {
        snprintf(lv, sizeof(lv), "s%u", i);
      } else {
        snprintf(lv, sizeof(lv), c == 1 ? "in%u[0]" : "in%u[i]", i);
      }
      emit_load(&body, v->type->dtype, name, lv);
    }
    st = value_add(&g, v, "x%u", i);
    if (st) goto fail;
  }
  for (uint32_t o = 0; o < f->num_ops; ++o) {
    if (f->ops[o]->kind == IRON_OP_DYNAMIC_UPDATE_SLICE) continue;  // below
    st = gen_op(&g, f->ops[o], o);
    if (st) goto fail;
  }
  for (uint32_t j = 0; j < f->num_outputs; ++j) {
    const iron_ir_op_t *d = iron_cuda_fusion_dus_root(f, j);
    if (d) {
      // The update's element goes to its place in the operand, which the
      // output holds (in place, or copied there by iron_cuda_ew_run).
      const iron_ir_type_t *xt = d->operands[0]->type;
      const iron_ir_type_t *ut = d->operands[1]->type;
      const char *n = value_name(&g, d->operands[1]);
      char cn[IRON_MAX_RANK][16];
      if (!n || f->device_fn || vec || !map_coords(&g, ut, cn)) {
        st = iron_ir_op_unimplemented(d, "in this CUDA fusion");
        goto fail;
      }
      char pre[16];
      snprintf(pre, sizeof(pre), "u%u", j);
      iron_cuda_text_printf(&body, "    {\n");
      emit_clamped_starts(&g, d, 2, pre, xt, ut->dims);
      int64_t xs = 1, xstr[IRON_MAX_RANK];
      for (int32_t k = xt->rank - 1; k >= 0; --k) {
        xstr[k] = xs;
        xs *= xt->dims[k];
      }
      char se[512];
      iron_cuda_store_rounded_expr(f->outputs[j]->type->dtype, n, se,
                                   sizeof(se));
      iron_cuda_text_printf(&body, "    out%u[0LL", j);
      for (int32_t k = 0; k < xt->rank; ++k)
        iron_cuda_text_printf(&body, " + (%s_s%d + (long long)%s) * %lldLL",
                              pre, k, cn[k], (long long)xstr[k]);
      iron_cuda_text_printf(&body, "] = %s;\n    }\n", se);
      continue;
    }
    const char *n = value_name(&g, f->outputs[j]);
    if (!n) {
      st = IRON_ERR(INVALID_ARGUMENT, "CUDA fusion: output %u not defined", j);
      goto fail;
    }
    char se[512];
    if (f->device_fn)
      snprintf(se, sizeof(se), "%s", n);
    else
      iron_cuda_store_rounded_expr(f->outputs[j]->type->dtype, n, se,
                                   sizeof(se));
    iron_cuda_text_printf(
        &body, vec || f->device_fn ? "    r%u = %s;\n" : "    out%u[i] = %s;\n",
        j, se);
  }
  if (vec) {
    // The kernel: vector loop when every full operand is aligned to its
    // vector, then the tail; otherwise element by element.
    const char *I = g.idx;
    iron_cuda_text_printf(
        &body,
        "  }\n}\n"
        "extern \"C\" __global__ void __launch_bounds__(256) %s(",
        IRON_CUDA_KERNEL_PLACEHOLDER);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      iron_cuda_text_printf(&body, "%sconst %s *in%u", i ? ", " : "",
                            st_ctype(f->inputs[i]->type->dtype), i);
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_text_printf(&body, "%s%s *out%u",
                            (f->num_inputs || j) ? ", " : "",
                            st_ctype(f->outputs[j]->type->dtype), j);
    }
    iron_cuda_text_printf(
        &body,
        ") {\n"
        "  const %s n = %lldLL;\n"
        "  const %s tid = (%s)blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  const %s nt = (%s)gridDim.x * blockDim.x;\n"
        "  bool al = true;\n",
        I, (long long)g.count, I, I, I, I);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      if (type_count(f->inputs[i]->type) != g.count) continue;
      iron_cuda_text_printf(&body,
                            "  al = al && ((unsigned long long)in%u %% "
                            "(sizeof(*in%u) * %d)) == 0;\n",
                            i, i, vw);
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_text_printf(&body,
                            "  al = al && ((unsigned long long)out%u %% "
                            "(sizeof(*out%u) * %d)) == 0;\n",
                            j, j, vw);
    }
    // Arguments of the element function, per element k of vector j.
    iron_cuda_text_t va, sa;
    iron_cuda_text_init(&va);
    iron_cuda_text_init(&sa);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      bool full = type_count(f->inputs[i]->type) == g.count && g.count != 1;
      iron_cuda_text_printf(&va, "%s%s", i ? ", " : "", full ? "" : "");
      if (full) {
        iron_cuda_text_printf(&va, "a%u.v[k]", i);
        iron_cuda_text_printf(&sa, "%sin%u[i]", i ? ", " : "", i);
      } else {
        // One element (a broadcast scalar), read once before the loops:
        // the compiler cannot hoist it past the stores to the outputs.
        iron_cuda_text_printf(&body, "  const %s h%u = in%u[0];\n",
                              st_ctype(f->inputs[i]->type->dtype), i, i);
        iron_cuda_text_printf(&va, "h%u", i);
        iron_cuda_text_printf(&sa, "%sh%u", i ? ", " : "", i);
      }
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      const char *sep = (f->num_inputs || j) ? ", " : "";
      iron_cuda_text_printf(&va, "%sb%u.v[k]", sep, j);
      iron_cuda_text_printf(&sa, "%sout%u[i]", sep, j);
    }
    char *vas = NULL, *sas = NULL;
    st = iron_cuda_text_finish(&va, &vas);
    if (!st) st = iron_cuda_text_finish(&sa, &sas);
    if (st) {
      free(vas);
      iron_cuda_text_free(&sa);
      goto fail;
    }
    // Unaligned operands run everything through the tail loop.
    iron_cuda_text_printf(&body,
                          "  const %s nv = al ? n / %d : 0;\n"
                          "  for (%s j = tid; j < nv; j += nt) {\n",
                          I, vw, I);
    for (uint32_t i = 0; i < f->num_inputs; ++i) {
      if (type_count(f->inputs[i]->type) != g.count) continue;
      const char *ct = st_ctype(f->inputs[i]->type->dtype);
      iron_cuda_text_printf(&body,
                            "      const iron_vec<%s, %d> a%u = "
                            "((const iron_vec<%s, %d> *)in%u)[j];\n",
                            ct, vw, i, ct, vw, i);
    }
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      iron_cuda_text_printf(&body, "      iron_vec<%s, %d> b%u;\n",
                            st_ctype(f->outputs[j]->type->dtype), vw, j);
    }
    iron_cuda_text_printf(&body,
                          "#pragma unroll\n"
                          "      for (int k = 0; k < %d; ++k) %s_f(%s);\n",
                          vw, IRON_CUDA_KERNEL_PLACEHOLDER, vas);
    for (uint32_t j = 0; j < f->num_outputs; ++j) {
      const char *ct = st_ctype(f->outputs[j]->type->dtype);
      iron_cuda_text_printf(
          &body, "      ((iron_vec<%s, %d> *)out%u)[j] = b%u;\n", ct, vw, j, j);
    }
    iron_cuda_text_printf(
        &body,
        "  }\n"
        "  for (%s i = nv * %d + tid; i < n; i += nt) %s_f(%s);\n"
        "}\n",
        I, vw, IRON_CUDA_KERNEL_PLACEHOLDER, sas);
    free(vas);
    free(sas);
  } else {
    iron_cuda_text_printf(&body, "  }\n}\n");
  }
  free(g.vals);
  if (f->device_fn) {
    char *nm = strdup(f->device_fn);
    if (!nm) {
      iron_cuda_text_free(&body);
      return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
    }
    st = iron_cuda_text_finish(&body, out_source);
    if (st) {
      free(nm);
      return st;
    }
    *out_name = nm;
    return IRON_OK;
  }
  return iron_cuda_source_make(&body, "iron_ew", out_source, out_name);
fail:
  free(g.vals);
  iron_cuda_text_free(&body);
  return st;
}
