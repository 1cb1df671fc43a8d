// reduce_window / select_and_scatter windows shared by the devices
// (window_plan.h).
#include "device/plans/window_plan.h"

#include <string.h>

static bool static_tensor(const iron_ir_type_t *t) {
  return t && t->kind == IRON_TYPE_TENSOR && iron_ir_type_is_static(t) &&
         iron_ir_type_num_elements(t) >= 0 && iron_dtype_size(t->dtype) > 0;
}

static bool same_shape(const iron_ir_type_t *a, const iron_ir_type_t *b) {
  return a->rank == b->rank &&
         memcmp(a->dims, b->dims, sizeof(int64_t) * (size_t)a->rank) == 0;
}

iron_status_t iron_window_plan_check_types(const iron_ir_op_t *op,
                                           iron_window_plan_t *out) {
  if (op->kind == IRON_OP_SELECT_AND_SCATTER) {
    out->select_and_scatter = true;
    if (op->num_operands != 3 || op->num_results != 1 || op->num_regions != 2)
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad operand/result counts",
                      op->name);
    for (uint32_t i = 0; i < 3; ++i)
      if (!static_tensor(op->operands[i]->type))
        return iron_ir_op_unimplemented(op, "for operand %u's type", i);
    const iron_ir_type_t *ot = op->operands[0]->type,
                         *st = op->operands[1]->type,
                         *it = op->operands[2]->type, *rt = op->results[0].type;
    if (!static_tensor(rt) || it->rank != 0 || st->dtype != ot->dtype ||
        it->dtype != ot->dtype || st->rank != ot->rank ||
        !iron_ir_type_equal(ot, rt))
      return IRON_ERR(INVALID_ARGUMENT, "%s: operand/result types disagree",
                      op->name);
    out->num_inputs = 1;
    out->in = ot;
    out->source = st;
    return IRON_OK;
  }
  uint32_t n = op->num_operands / 2;
  if (op->num_operands % 2 || n == 0 || op->num_results != n ||
      op->num_regions != 1)
    return IRON_ERR(INVALID_ARGUMENT, "%s: bad operand/result counts",
                    op->name);
  const iron_ir_type_t *t0 = op->operands[0]->type;
  for (uint32_t i = 0; i < 2 * n; ++i) {
    const iron_ir_type_t *t = op->operands[i]->type;
    if (!static_tensor(t))
      return iron_ir_op_unimplemented(op, "for operand %u's type", i);
    if (i < n && !same_shape(t, t0))
      return IRON_ERR(INVALID_ARGUMENT, "%s: input shapes differ", op->name);
    if (i >= n &&
        (t->rank != 0 || t->dtype != op->operands[i - n]->type->dtype))
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad init value %u", op->name,
                      i - n);
  }
  for (uint32_t i = 0; i < n; ++i) {
    const iron_ir_type_t *rt = op->results[i].type;
    if (!static_tensor(rt) || rt->dtype != op->operands[i]->type->dtype ||
        rt->rank != t0->rank)
      return IRON_ERR(INVALID_ARGUMENT, "%s: result %u type mismatch",
                      op->name, i);
  }
  out->num_inputs = n;
  out->in = t0;
  out->source = NULL;
  return IRON_OK;
}

// A list of `rank` entries, or (absent / empty) `rank` copies of dflt.
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

// Every size derived from the window must fit int64 with room to spare, so
// that the run-time arithmetic (o * stride + k * dilation - pad, in C and
// in generated CUDA) cannot overflow: values and intermediate sizes stay
// below 2^62.
#define WINDOW_MAX ((int64_t)1 << 62)

static bool mul_ok(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_mul_overflow(a, b, out) && *out < WINDOW_MAX &&
         *out > -WINDOW_MAX;
}
static bool add_ok(int64_t a, int64_t b, int64_t *out) {
  return !__builtin_add_overflow(a, b, out) && *out < WINDOW_MAX &&
         *out > -WINDOW_MAX;
}

iron_status_t iron_window_plan_read_attrs(const iron_ir_op_t *op,
                                          iron_window_plan_t *out) {
  const iron_ir_type_t *in = out->in;
  int32_t rank = in->rank;
  out->rank = rank;
  IRON_RETURN_IF_ERROR_PLAIN(
      read_list(op, "window_dimensions", rank, 1, out->wdims));
  IRON_RETURN_IF_ERROR_PLAIN(
      read_list(op, "window_strides", rank, 1, out->strides));
  if (out->select_and_scatter) {
    for (int32_t d = 0; d < rank; ++d) out->base_dil[d] = out->win_dil[d] = 1;
  } else {
    IRON_RETURN_IF_ERROR_PLAIN(
        read_list(op, "base_dilations", rank, 1, out->base_dil));
    IRON_RETURN_IF_ERROR_PLAIN(
        read_list(op, "window_dilations", rank, 1, out->win_dil));
  }
  int64_t pad[2 * IRON_MAX_RANK] = {0};
  uint32_t np = 0;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_ir_op_i64_list(op, "padding", pad, 2 * IRON_MAX_RANK, &np));
  if (np != 0 && (int32_t)np != 2 * rank)
    return IRON_ERR(INVALID_ARGUMENT, "%s: padding has %u entries for rank %d",
                    op->name, np, rank);
  int64_t stride = 1;
  for (int32_t d = rank - 1; d >= 0; --d) {
    out->in_strides[d] = stride;
    stride *= in->dims[d];  // the type's element count fits (step 1)
  }
  out->out_count = 1;
  out->win_count = 1;
  for (int32_t d = 0; d < rank; ++d) {
    int64_t n = in->dims[d], wd = out->wdims[d], st = out->strides[d];
    int64_t bd = out->base_dil[d], wdl = out->win_dil[d];
    int64_t lo = pad[2 * d], hi = pad[2 * d + 1];
    int64_t dil_in = 0, padded, ext, span;
    bool ok = wd >= 1 && st >= 1 && bd >= 1 && wdl >= 1 && n >= 0 &&
              st < WINDOW_MAX && lo > -WINDOW_MAX && lo < WINDOW_MAX &&
              hi > -WINDOW_MAX && hi < WINDOW_MAX &&
              (n == 0 || (mul_ok(n - 1, bd, &dil_in) &&
                          add_ok(dil_in, 1, &dil_in))) &&
              add_ok(dil_in, lo, &padded) && add_ok(padded, hi, &padded) &&
              mul_ok(wd - 1, wdl, &ext) && add_ok(ext, 1, &ext) &&
              add_ok(padded, -ext, &span);
    if (!ok)
      return IRON_ERR(INVALID_ARGUMENT, "%s: bad window in dim %d", op->name,
                      d);
    int64_t o = span < 0 ? 0 : span / st + 1;
    out->in_dims[d] = n;
    out->dil_in[d] = dil_in;
    out->pad_lo[d] = lo;
    out->pad_hi[d] = hi;
    out->out_dims[d] = o;
    out->max_valid[d] = wd < n ? wd : n;
    if (!mul_ok(out->out_count, o, &out->out_count) ||
        !mul_ok(out->win_count, wd, &out->win_count))
      return IRON_ERR(INVALID_ARGUMENT, "%s: window too large", op->name);
  }
  return IRON_OK;
}

iron_status_t iron_window_plan_check_sizes(const iron_ir_op_t *op,
                                           const iron_window_plan_t *plan) {
  if (plan->select_and_scatter) {
    for (int32_t d = 0; d < plan->rank; ++d)
      if (plan->source->dims[d] != plan->out_dims[d])
        return IRON_ERR(INVALID_ARGUMENT,
                        "%s: source dim %d is %lld, the windows give %lld",
                        op->name, d, (long long)plan->source->dims[d],
                        (long long)plan->out_dims[d]);
    return IRON_OK;
  }
  for (uint32_t i = 0; i < plan->num_inputs; ++i) {
    const iron_ir_type_t *rt = op->results[i].type;
    for (int32_t d = 0; d < plan->rank; ++d)
      if (rt->dims[d] != plan->out_dims[d])
        return IRON_ERR(INVALID_ARGUMENT,
                        "%s: result %u dim %d is %lld, the windows give %lld",
                        op->name, i, d, (long long)rt->dims[d],
                        (long long)plan->out_dims[d]);
  }
  return IRON_OK;
}

iron_status_t iron_window_plan_read(const iron_ir_op_t *op,
                                    iron_window_plan_t *out) {
  memset(out, 0, sizeof(*out));
  IRON_RETURN_IF_ERROR_PLAIN(iron_window_plan_check_types(op, out));
  IRON_RETURN_IF_ERROR_PLAIN(iron_window_plan_read_attrs(op, out));
  return iron_window_plan_check_sizes(op, out);
}

// Floor division and modulo for a positive divisor.
static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}
static int64_t pos_mod(int64_t a, int64_t m) {
  int64_t r = a % m;
  return r < 0 ? r + m : r;
}

// x with a * x == 1 (mod m), for gcd(a, m) == 1 and m >= 1.
static int64_t mod_inverse(int64_t a, int64_t m) {
  __int128 t = 0, nt = 1, r = m, nr = pos_mod(a, m);
  while (nr != 0) {
    __int128 q = r / nr, tmp;
    tmp = t - q * nt;
    t = nt;
    nt = tmp;
    tmp = r - q * nr;
    r = nr;
    nr = tmp;
  }
  return (int64_t)(t < 0 ? t + m : t);
}

static int64_t gcd64(int64_t a, int64_t b) {
  while (b) {
    int64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

int64_t iron_window_plan_dim_offsets(const iron_window_plan_t *p, int32_t d,
                                     int64_t o, int64_t *out_offs) {
  // Position of window index k: pos = base + k * wdl, valid when
  // 0 <= pos < dil_in and pos % bd == 0 (it then reads element pos / bd).
  const int64_t wd = p->wdims[d], wdl = p->win_dil[d], bd = p->base_dil[d];
  const int64_t dil_in = p->dil_in[d], is = p->in_strides[d];
  if (dil_in == 0) return 0;
  const int64_t base = o * p->strides[d] - p->pad_lo[d];
  if (bd == 1 && wdl == 1) {  // the common case: a contiguous range
    int64_t lo = base < 0 ? -base : 0, hi = dil_in - base;
    if (hi > wd) hi = wd;
    int64_t c = 0;
    for (int64_t k = lo; k < hi; ++k) out_offs[c++] = (base + k) * is;
    return c;
  }
  // k range with 0 <= pos <= dil_in - 1.
  int64_t k_lo = base >= 0 ? 0 : floor_div(-base + wdl - 1, wdl);
  int64_t k_hi = dil_in - 1 - base < 0 ? -1 : floor_div(dil_in - 1 - base, wdl);
  if (k_hi > wd - 1) k_hi = wd - 1;
  if (k_lo > k_hi) return 0;
  int64_t k0 = k_lo, step = 1;
  if (bd > 1) {
    // base + k * wdl == 0 (mod bd): k == k_first (mod bd / g).
    int64_t g = gcd64(wdl % bd, bd);
    if (pos_mod(-base, g) != 0) return 0;
    int64_t m = bd / g;
    int64_t r = m == 1 ? 0
                       : (int64_t)((__int128)pos_mod(-base / g, m) *
                                   mod_inverse((wdl / g) % m, m) % m);
    k0 = k_lo + pos_mod(r - k_lo, m);
    step = m;
  }
  // Consecutive valid positions are step * wdl apart, a multiple of bd:
  // no division per element.
  int64_t c = 0, off = (base + k0 * wdl) / bd * is, inc = step * wdl / bd * is;
  for (int64_t k = k0; k <= k_hi; k += step, off += inc) out_offs[c++] = off;
  return c;
}
