// stablehlo.convolution -> a cuDNN call plan (cuda_cudnn_plan.h: the
// mapping and the semantics it relies on).
#include "device/cuda/cuda_cudnn_plan.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "device/cuda/cuda_cudnn_api.h"
#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_ops_internal.h"

const char *iron_cudnn_call_name(iron_cudnn_call_t call) {
  switch (call) {
    case IRON_CUDNN_CALL_FORWARD: return "forward";
    case IRON_CUDNN_CALL_BACKWARD_DATA: return "backward_data";
    case IRON_CUDNN_CALL_BACKWARD_FILTER: return "backward_filter";
  }
  return "?";
}

static bool refuse(char *why, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static bool refuse(char *why, size_t cap, const char *fmt, ...) {
  if (why && cap) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, cap, fmt, ap);
    va_end(ap);
  }
  return false;
}

static void row_major(const iron_ir_type_t *t, int64_t *strides) {
  int64_t s = 1;
  for (int32_t d = t->rank - 1; d >= 0; --d) {
    strides[d] = s;
    s *= t->dims[d];
  }
}

// A stablehlo tensor seen in cuDNN roles: dims n_dim (N or K), c_dim (C),
// and its real spatial dims sp[0..nsp) (the plan's spatial order).
typedef struct view {
  const iron_ir_type_t *t;
  int64_t st[IRON_MAX_RANK];
  int64_t n_dim, c_dim;
  int64_t sp[IRON_CUDNN_MAX_SP];
} view_t;

static void view_init(view_t *v, const iron_ir_type_t *t, int64_t n_dim,
                      int64_t c_dim, const int64_t *sp, int32_t nsp) {
  v->t = t;
  row_major(t, v->st);
  v->n_dim = n_dim;
  v->c_dim = c_dim;
  for (int32_t d = 0; d < nsp; ++d) v->sp[d] = sp[d];
}

// The plan's geometry: nsp real spatial dims, nspc cuDNN spatial slots
// (leading unit slots pad 0-D and 1-D convolutions to 2-D).
typedef struct geom {
  int32_t nsp, nspc, units;
} geom_t;

// Real spatial dim of slot j, or -1 for a unit slot.
static int32_t slot_real(const geom_t *g, int32_t j) {
  return j < g->units ? -1 : j - g->units;
}

// Strides of the roles (N, C, slots) of a tensor with role extents `ext`
// (2 + nspc) laid out densely in the dim order of view v (innermost =
// largest stablehlo dim index), unit slots just outside the first real
// spatial dim.
static void dense_like(const view_t *v, const geom_t *g, const int64_t *ext,
                       int64_t *out_strides) {
  // role -> stablehlo dim (unit slots: none)
  int64_t dim_of[IRON_CUDNN_MAX_ND];
  int32_t nroles = 2 + g->nspc;
  dim_of[0] = v->n_dim;
  dim_of[1] = v->c_dim;
  for (int32_t j = 0; j < g->nspc; ++j) {
    int32_t r = slot_real(g, j);
    dim_of[2 + j] = r < 0 ? -1 : v->sp[r];
  }
  int64_t s = 1;
  for (int32_t d = v->t->rank - 1; d >= 0; --d)
    for (int32_t k = 0; k < nroles; ++k)
      if (dim_of[k] == d) {
        out_strides[k] = s;
        s *= ext[k];
      }
  for (int32_t j = 0; j < g->nspc; ++j)
    if (dim_of[2 + j] < 0)
      out_strides[2 + j] =
          g->nsp > 0 ? out_strides[2 + g->units] * ext[2 + g->units] : 1;
}

// The tensor of view v in place: role extents `ext`, spatial start
// offsets `start` (per slot).
static void view_tensor(const view_t *v, const geom_t *g, const int64_t *ext,
                        const int64_t *start, int32_t buf,
                        iron_cudnn_tensor_t *out) {
  memset(out, 0, sizeof(*out));
  out->buf = buf;
  out->dims[0] = ext[0];
  out->strides[0] = v->st[v->n_dim];
  out->dims[1] = ext[1];
  out->strides[1] = v->st[v->c_dim];
  for (int32_t j = 0; j < g->nspc; ++j) {
    int32_t r = slot_real(g, j);
    out->dims[2 + j] = ext[2 + j];
    if (r < 0) {
      out->strides[2 + j] =
          g->nsp > 0 ? v->st[v->sp[0]] * v->t->dims[v->sp[0]] : 1;
    } else {
      out->strides[2 + j] = v->st[v->sp[r]];
      out->offset += start[j] * v->st[v->sp[r]];
    }
  }
}

// --- per spatial dim: gather form (forward, backward filter) -------------

// The input x of a gather-form call along one dim: positions
// u = o*sc - pl + k*dc (o < oc, k < kc) of an input of extent `in`.
typedef struct gdim {
  bool stage;     // needs a padded copy
  int64_t pad;    // cuDNN padding
  int64_t ext;    // extent cuDNN sees
  int64_t start;  // direct: first input element used
  // staged: copy input [src0, src0 + n) to [dst0, dst0 + n) of the stage
  int64_t src0, dst0, n;
} gdim_t;

static void gather_dim(int64_t in, int64_t pl, int64_t oc, int64_t kc,
                       int64_t sc, int64_t dc, gdim_t *g) {
  memset(g, 0, sizeof(*g));
  const int64_t dk = (kc - 1) * dc + 1;
  const int64_t p = pl > 0 ? pl : 0, a = pl < 0 ? -pl : 0;
  const int64_t avail = in - a;
  // cuDNN coordinate of the last position read (cuDNN's input starts at
  // input element a, its padding p in front of it).
  const int64_t umax = (oc - 1) * sc + (kc - 1) * dc - p;
  // The whole input when cuDNN's output count comes out right with it
  // (positions past the last window are never read; positions past the
  // input are stablehlo's high padding, which cuDNN's own covers), else
  // only up to the last position read (a crop: strides of the larger
  // tensor).
  for (int pass = 0; pass < 2; ++pass) {
    const int64_t ext = pass == 0 ? avail : umax + 1;
    if (pass == 1 && ext >= avail) break;
    const int64_t span = ext + 2 * p - dk;
    if (ext >= 1 && span >= 0 && span / sc + 1 == oc) {
      g->pad = p;
      g->ext = ext;
      g->start = a;
      g->src0 = a;
      g->dst0 = 0;
      g->n = ext;
      return;
    }
  }
  // Explicit padding: the stage holds positions [-pl, -pl + v) of the
  // padded input (zeros outside the input), cuDNN pads nothing.
  const int64_t v = (oc - 1) * sc + dk;
  g->stage = true;
  g->pad = 0;
  g->ext = v;
  g->dst0 = pl > 0 ? pl : 0;
  int64_t end = in + pl < v ? in + pl : v;
  g->n = end > g->dst0 ? end - g->dst0 : 0;
  g->src0 = g->dst0 - pl;
}

// --- per spatial dim: scatter form (backward data) --------------------------

// The result of a transposed convolution along one dim: result element
// j gets lhs[o] * rhs[k] for j = o*s + pl - k*d (o < o_n, k < kn).
typedef struct sdim {
  bool stage;     // computed into a larger buffer, then copied
  int64_t pad;    // cuDNN padding
  int64_t ext;    // extent of cuDNN's dx
  int64_t e;      // result element of dx element 0
  int64_t n;      // dx elements [0, n) go to result [e, e + n)
  int64_t extra;  // zero dy elements appended (dy staged)
} sdim_t;

static bool scatter_dim(int64_t jn, int64_t o_n, int64_t kn, int64_t s,
                        int64_t d, int64_t pl, sdim_t *r, char *why,
                        size_t cap, int32_t dim) {
  memset(r, 0, sizeof(*r));
  const int64_t kd = (kn - 1) * d;
  const int64_t p = kd - pl > 0 ? kd - pl : 0, e = pl - kd > 0 ? pl - kd : 0;
  // Contributions reach dx elements [0, imax] (cuDNN coordinates).
  const int64_t imax = (o_n - 1) * s + kd - p;
  // cuDNN's forward formula gives o_n + z outputs (z zero dy elements
  // appended) for dx extents [lo + z*s, lo + z*s + s - 1].
  const int64_t lo = imax + 1 - p;
  const int64_t jz = jn - e;  // result elements at dx coordinates >= 0
  r->pad = p;
  r->e = e;
  if (jz >= 1 && jz >= lo) {
    const int64_t z = (jz - lo) / s;
    if (z > 0 && imax >= 0 && imax + 1 <= lo + s - 1) {
      // Result elements past every contribution: zeros (the result is
      // zero-filled); cuDNN's extent stops after the last contribution.
      r->ext = imax + 1;
    } else {
      // The result's extent, with zero dy elements appended where cuDNN's
      // padding would otherwise ask for fewer.
      r->ext = jz;
      r->extra = z;
    }
  } else {
    // The result is shorter than any dx cuDNN computes (or lies wholly in
    // the zeros before the first contribution): compute more, copy the
    // part the result holds.
    r->stage = true;
    const int64_t want = lo > 1 ? lo : 1;
    const int64_t z =
        want > lo + s - 1 ? (want - (lo + s - 1) + s - 1) / s : 0;
    r->extra = z;
    r->ext = want > lo + z * s ? want : lo + z * s;
  }
  r->n = jz <= 0 ? 0 : r->ext < jz ? r->ext : jz;
  const int64_t span = r->ext + 2 * p - (kd + 1);
  if (r->ext < 1 || span < 0 || span / s + 1 != o_n + r->extra)
    return refuse(why, cap, "spatial dim %d: inconsistent sizes", dim);
  return true;
}

// --- filters -------------------------------------------------------------------

// Dense strides of a filter (K, C/G, slots) in `format`.
static void filter_strides(const int64_t *dims, int32_t nspc, int format,
                           int64_t *out) {
  int64_t sp = 1;
  for (int32_t j = nspc - 1; j >= 0; --j) {
    out[2 + j] = (format == IRON_CUDNN_TENSOR_NHWC ? dims[1] : 1) * sp;
    sp *= dims[2 + j];
  }
  out[1] = format == IRON_CUDNN_TENSOR_NHWC ? 1 : sp;
  out[0] = dims[1] * sp;
}

// Whether two stride lists agree on every dim of extent > 1.
static bool same_strides(int32_t nd, const int64_t *dims, const int64_t *a,
                         const int64_t *b) {
  for (int32_t k = 0; k < nd; ++k)
    if (dims[k] > 1 && a[k] != b[k]) return false;
  return true;
}

static int64_t tensor_span(int32_t nd, const int64_t *dims,
                           const int64_t *strides) {
  int64_t s = 1;
  for (int32_t k = 0; k < nd; ++k) s += (dims[k] - 1) * strides[k];
  return s;
}

static bool fits_int(int64_t v) { return v >= 0 && v <= INT32_MAX; }

// Lowest and highest element a strided box touches.
static void index_range(int32_t nd, const int64_t *dims, int64_t offset,
                        const int64_t *strides, int64_t *lo, int64_t *hi) {
  *lo = *hi = offset;
  for (int32_t k = 0; k < nd; ++k) {
    int64_t e = (dims[k] - 1) * strides[k];
    if (e < 0)
      *lo += e;
    else
      *hi += e;
  }
}

static bool tensor_fits(int32_t nd, const iron_cudnn_tensor_t *t) {
  for (int32_t k = 0; k < nd; ++k)
    if (!fits_int(t->dims[k]) || !fits_int(t->strides[k])) return false;
  return fits_int(tensor_span(nd, t->dims, t->strides));
}

// --- planning ----------------------------------------------------------------

static int32_t add_stage(iron_cudnn_plan_t *p, int64_t elems, bool zero) {
  int32_t k = p->num_stage++;
  p->stage_elems[k] = elems;
  p->stage_zero[k] = zero;
  return IRON_CUDNN_BUF_STAGE + k;
}

static int64_t prod(int32_t n, const int64_t *v) {
  int64_t r = 1;
  for (int32_t k = 0; k < n; ++k) r *= v[k];
  return r;
}

// The gather-form input x from view v (role extents N, C), per slot gdims.
static void plan_gather_input(iron_cudnn_plan_t *p, const geom_t *g,
                              const view_t *v, int32_t src_buf,
                              const gdim_t *gd, bool packed) {
  const int32_t nd = 2 + g->nspc;
  int64_t ext[IRON_CUDNN_MAX_ND], start[IRON_CUDNN_MAX_SP];
  ext[0] = v->t->dims[v->n_dim];
  ext[1] = v->t->dims[v->c_dim];
  bool stage = false, crop = false;
  for (int32_t j = 0; j < g->nspc; ++j) {
    int32_t r = slot_real(g, j);
    ext[2 + j] = gd[j].ext;
    start[j] = gd[j].start;
    stage = stage || gd[j].stage;
    crop = crop || (r >= 0 && (gd[j].start > 0 ||
                               gd[j].ext < v->t->dims[v->sp[r]]));
  }
  if (packed && crop) stage = true;
  p->cropped = p->cropped || (crop && !stage);
  if (!stage) {
    view_tensor(v, g, ext, start, src_buf, &p->x);
    return;
  }
  // One staged copy holds every dim (direct dims copied as they are).
  iron_cudnn_tensor_t *x = &p->x;
  memset(x, 0, sizeof(*x));
  for (int32_t k = 0; k < nd; ++k) x->dims[k] = ext[k];
  dense_like(v, g, ext, x->strides);
  bool zero = false;
  int64_t box[IRON_CUDNN_MAX_ND];
  box[0] = ext[0];
  box[1] = ext[1];
  for (int32_t j = 0; j < g->nspc; ++j) {
    box[2 + j] = gd[j].n;
    zero = zero || gd[j].n < gd[j].ext;
  }
  x->buf = add_stage(p, prod(nd, ext), zero);
  if (prod(nd, box) == 0) return;  // all padding: zeros
  iron_cudnn_tensor_t src;
  int64_t src_start[IRON_CUDNN_MAX_SP];
  for (int32_t j = 0; j < g->nspc; ++j) src_start[j] = gd[j].src0;
  view_tensor(v, g, box, src_start, src_buf, &src);
  iron_cudnn_copy_t *c = &p->pre[p->num_pre++];
  memset(c, 0, sizeof(*c));
  c->src_buf = src_buf;
  c->dst_buf = x->buf;
  c->nd = nd;
  c->src_offset = src.offset;
  for (int32_t k = 0; k < nd; ++k) {
    c->dims[k] = box[k];
    c->src_strides[k] = src.strides[k];
    c->dst_strides[k] = x->strides[k];
    if (k >= 2) c->dst_offset += gd[k - 2].dst0 * x->strides[k];
  }
}

// An input filter: the box `dims`/`src_strides` of the operand (nd dims,
// the last 2 + nspc of which are K, C/G, slots unless split: a grouped
// backward-data filter has dims (G, K/G, C/G, slots) whose first two form
// K) into w's dense format.
static void plan_input_filter(iron_cudnn_plan_t *p, const geom_t *g,
                              int32_t src_buf, bool split, int64_t groups,
                              const int64_t *fdims,
                              const int64_t *src_strides) {
  const int32_t nd = 2 + g->nspc;
  iron_cudnn_tensor_t *w = &p->w;
  memset(w, 0, sizeof(*w));
  for (int32_t k = 0; k < nd; ++k) w->dims[k] = fdims[k];
  filter_strides(w->dims, g->nspc, p->filter_format, w->strides);
  if (!split && same_strides(nd, w->dims, src_strides, w->strides)) {
    w->buf = src_buf;
    return;
  }
  w->buf = add_stage(p, prod(nd, w->dims), false);
  iron_cudnn_copy_t *c = &p->pre[p->num_pre++];
  memset(c, 0, sizeof(*c));
  c->src_buf = src_buf;
  c->dst_buf = w->buf;
  if (!split) {
    c->nd = nd;
    for (int32_t k = 0; k < nd; ++k) {
      c->dims[k] = w->dims[k];
      c->src_strides[k] = src_strides[k];
      c->dst_strides[k] = w->strides[k];
    }
    return;
  }
  // K = (group, feature in group): src_strides[0] steps groups,
  // src_strides[1] features within one.
  c->nd = nd + 1;
  c->dims[0] = groups;
  c->dims[1] = w->dims[0] / groups;
  c->src_strides[0] = src_strides[0];
  c->src_strides[1] = src_strides[1];
  c->dst_strides[0] = c->dims[1] * w->strides[0];
  c->dst_strides[1] = w->strides[0];
  for (int32_t k = 1; k < nd; ++k) {
    c->dims[k + 1] = w->dims[k];
    c->src_strides[k + 1] = src_strides[k + 1];
    c->dst_strides[k + 1] = w->strides[k];
  }
}

static int data_type_of(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_F32: return IRON_CUDNN_DATA_FLOAT;
    case IRON_DTYPE_F64: return IRON_CUDNN_DATA_DOUBLE;
    case IRON_DTYPE_F16: return IRON_CUDNN_DATA_HALF;
    case IRON_DTYPE_BF16: return IRON_CUDNN_DATA_BFLOAT16;
    default: return -1;
  }
}

int iron_cudnn_plan_calls(const iron_conv_plan_t *cp,
                          iron_cudnn_call_t out_calls[2]) {
  bool lhs_dil = false, strided = false;
  for (int32_t d = 0; d < cp->nsp; ++d) {
    lhs_dil = lhs_dil || cp->lhs_dil[d] != 1;
    strided = strided || cp->stride[d] != 1;
  }
  if (lhs_dil) {
    if (strided || cp->batch_group_count != 1) return 0;
    out_calls[0] = IRON_CUDNN_CALL_BACKWARD_DATA;
    return 1;
  }
  if (cp->batch_group_count > 1) {
    out_calls[0] = IRON_CUDNN_CALL_BACKWARD_FILTER;
    return 1;
  }
  if (cp->feature_group_count > 1) {
    out_calls[0] = IRON_CUDNN_CALL_FORWARD;
    return 1;
  }
  // Both fit. jax's weight gradient swaps the lhs roles: its "batch" dim
  // is the input's feature dim, inside the "feature" dim (the input's
  // batch) in memory; the forward call would see the input as CHWN.
  int64_t st[IRON_MAX_RANK];
  row_major(cp->lhs, st);
  bool swapped = st[cp->in_batch_dim] < st[cp->in_feature_dim];
  out_calls[0] =
      swapped ? IRON_CUDNN_CALL_BACKWARD_FILTER : IRON_CUDNN_CALL_FORWARD;
  out_calls[1] =
      swapped ? IRON_CUDNN_CALL_FORWARD : IRON_CUDNN_CALL_BACKWARD_FILTER;
  return 2;
}

int64_t iron_cudnn_plan_buf_elems(const iron_conv_plan_t *cp,
                                  const iron_cudnn_plan_t *plan,
                                  int32_t buf) {
  switch (buf) {
    case IRON_CUDNN_BUF_LHS: return iron_ir_type_num_elements(cp->lhs);
    case IRON_CUDNN_BUF_RHS: return iron_ir_type_num_elements(cp->rhs);
    case IRON_CUDNN_BUF_OUT: return iron_ir_type_num_elements(cp->out);
    default: {
      int32_t k = buf - IRON_CUDNN_BUF_STAGE;
      return k >= 0 && k < plan->num_stage ? plan->stage_elems[k] : 0;
    }
  }
}

bool iron_cudnn_plan_make(const iron_conv_plan_t *cp, iron_cudnn_call_t call,
                          bool allow_tf32, iron_cudnn_plan_t *out, char *why,
                          size_t why_cap) {
  return iron_cudnn_plan_make_packed(cp, call, allow_tf32, false, out, why,
                                     why_cap);
}

bool iron_cudnn_plan_make_packed(const iron_conv_plan_t *cp,
                                 iron_cudnn_call_t call, bool allow_tf32,
                                 bool packed, iron_cudnn_plan_t *out,
                                 char *why, size_t why_cap) {
  memset(out, 0, sizeof(*out));
  if (why && why_cap) why[0] = '\0';
  const iron_ir_type_t *lt = cp->lhs, *rt = cp->rhs, *ot = cp->out;
  const iron_dtype_t dt = ot->dtype;
  if (lt->dtype != dt || rt->dtype != dt || data_type_of(dt) < 0)
    return refuse(why, why_cap, "dtypes %s x %s -> %s",
                  iron_dtype_name(lt->dtype), iron_dtype_name(rt->dtype),
                  iron_dtype_name(dt));
  if (cp->nsp > IRON_CUDNN_MAX_SP)
    return refuse(why, why_cap, "%d spatial dims (cuDNN: at most 3)",
                  cp->nsp);
  if (iron_ir_type_num_elements(lt) <= 0 ||
      iron_ir_type_num_elements(rt) <= 0 ||
      iron_ir_type_num_elements(ot) <= 0)
    return refuse(why, why_cap, "empty operand or result");
  int32_t nrev = 0;
  for (int32_t d = 0; d < cp->nsp; ++d) nrev += cp->reversal[d] != 0;
  if (nrev != 0 && nrev != cp->nsp)
    return refuse(why, why_cap, "window reversed in some dims only");
  const bool reversed = cp->nsp > 0 && nrev == cp->nsp;

  out->call = call;
  out->dtype = dt;
  out->data_type = data_type_of(dt);
  out->compute_type =
      dt == IRON_DTYPE_F64 ? IRON_CUDNN_DATA_DOUBLE : IRON_CUDNN_DATA_FLOAT;
  out->tf32 = dt == IRON_DTYPE_F32 && allow_tf32;
  geom_t g;
  g.nsp = cp->nsp;
  g.nspc = cp->nsp < 2 ? 2 : cp->nsp;
  g.units = g.nspc - g.nsp;
  out->nsp = g.nspc;
  for (int32_t j = 0; j < g.nspc; ++j) {
    out->pad[j] = 0;
    out->stride[j] = 1;
    out->dilation[j] = 1;
  }
  const int32_t nd = 2 + g.nspc;
  bool lhs_dil = false, strided = false;
  for (int32_t d = 0; d < cp->nsp; ++d) {
    lhs_dil = lhs_dil || cp->lhs_dil[d] != 1;
    strided = strided || cp->stride[d] != 1;
  }
  int64_t lst[IRON_MAX_RANK], rst[IRON_MAX_RANK], ost[IRON_MAX_RANK];
  row_major(lt, lst);
  row_major(rt, rst);
  row_major(ot, ost);
  const int64_t *isp = cp->in_sp_dim, *ksp = cp->k_sp_dim,
                *osp = cp->out_sp_dim;

  if (call == IRON_CUDNN_CALL_FORWARD ||
      call == IRON_CUDNN_CALL_BACKWARD_FILTER) {
    const bool fwd = call == IRON_CUDNN_CALL_FORWARD;
    if (lhs_dil)
      return refuse(why, why_cap, "%s: lhs_dilation > 1",
                    iron_cudnn_call_name(call));
    if (fwd && cp->batch_group_count != 1)
      return refuse(why, why_cap, "forward: batch_group_count > 1");
    if (!fwd && cp->feature_group_count != 1)
      return refuse(why, why_cap, "backward_filter: feature_group_count > 1");
    out->mode = fwd && reversed ? IRON_CUDNN_CONVOLUTION
                                : IRON_CUDNN_CROSS_CORRELATION;
    out->groups = fwd ? cp->feature_group_count : cp->batch_group_count;
    // x: forward's lhs as it is; backward filter's lhs with N and C from
    // its feature and batch dims.
    view_t xv;
    view_init(&xv, lt, fwd ? cp->in_batch_dim : cp->in_feature_dim,
              fwd ? cp->in_feature_dim : cp->in_batch_dim, isp, g.nsp);
    gdim_t gd[IRON_CUDNN_MAX_SP];
    for (int32_t j = 0; j < g.nspc; ++j) {
      int32_t r = slot_real(&g, j);
      if (r < 0) {
        gather_dim(1, 0, 1, 1, 1, 1, &gd[j]);
        continue;
      }
      // Output count / window extent / stride / dilation in cuDNN's roles.
      int64_t oc = fwd ? ot->dims[osp[r]] : rt->dims[ksp[r]];
      int64_t kc = fwd ? rt->dims[ksp[r]] : ot->dims[osp[r]];
      int64_t sc = fwd ? cp->stride[r] : cp->rhs_dil[r];
      int64_t dc = fwd ? cp->rhs_dil[r] : cp->stride[r];
      gather_dim(lt->dims[isp[r]], cp->pad[2 * r], oc, kc, sc, dc, &gd[j]);
      out->stride[j] = sc;
      out->dilation[j] = dc;
    }
    for (int32_t j = 0; j < g.nspc; ++j) out->pad[j] = gd[j].pad;
    plan_gather_input(out, &g, &xv, IRON_CUDNN_BUF_LHS, gd, packed);
    out->x_src = IRON_CUDNN_BUF_LHS;
    out->filter_format = out->x.strides[1] == 1 ? IRON_CUDNN_TENSOR_NHWC
                                                : IRON_CUDNN_TENSOR_NCHW;
    // The tensor that is not the filter (forward's result, backward
    // filter's dy = rhs) in place.
    view_t yv;
    if (fwd)
      view_init(&yv, ot, cp->out_batch_dim, cp->out_feature_dim, osp, g.nsp);
    else
      view_init(&yv, rt, cp->k_in_feature_dim, cp->k_out_feature_dim, ksp,
                g.nsp);
    int64_t yext[IRON_CUDNN_MAX_ND], zero_start[IRON_CUDNN_MAX_SP] = {0};
    yext[0] = yv.t->dims[yv.n_dim];
    yext[1] = yv.t->dims[yv.c_dim];
    for (int32_t j = 0; j < g.nspc; ++j) {
      int32_t r = slot_real(&g, j);
      yext[2 + j] = r < 0 ? 1 : yv.t->dims[yv.sp[r]];
    }
    view_tensor(&yv, &g, yext, zero_start,
                fwd ? IRON_CUDNN_BUF_OUT : IRON_CUDNN_BUF_RHS, &out->y);
    out->y_src = fwd ? IRON_CUDNN_BUF_OUT : IRON_CUDNN_BUF_RHS;
    if (!fwd && reversed) {
      // A reversed window reverses dy's positions: cuDNN reads a copy of
      // dy with its spatial dims reversed.
      const iron_cudnn_tensor_t src = out->y;
      iron_cudnn_tensor_t *y = &out->y;
      memset(y, 0, sizeof(*y));
      for (int32_t k = 0; k < nd; ++k) y->dims[k] = yext[k];
      dense_like(&yv, &g, yext, y->strides);
      y->buf = add_stage(out, prod(nd, yext), false);
      iron_cudnn_copy_t *c = &out->pre[out->num_pre++];
      memset(c, 0, sizeof(*c));
      c->src_buf = IRON_CUDNN_BUF_RHS;
      c->dst_buf = y->buf;
      c->nd = nd;
      c->src_offset = src.offset;
      for (int32_t k = 0; k < nd; ++k) {
        c->dims[k] = yext[k];
        c->dst_strides[k] = y->strides[k];
        c->src_strides[k] = k >= 2 ? -src.strides[k] : src.strides[k];
        if (k >= 2) c->src_offset += (yext[k] - 1) * src.strides[k];
      }
    }
    // The filter: forward's rhs (K <- kernel output feature), backward
    // filter's result (K <- result feature, C/G <- result batch).
    view_t wv;
    if (fwd)
      view_init(&wv, rt, cp->k_out_feature_dim, cp->k_in_feature_dim, ksp,
                g.nsp);
    else
      view_init(&wv, ot, cp->out_feature_dim, cp->out_batch_dim, osp, g.nsp);
    int64_t wext[IRON_CUDNN_MAX_ND];
    wext[0] = wv.t->dims[wv.n_dim];
    wext[1] = wv.t->dims[wv.c_dim];
    for (int32_t j = 0; j < g.nspc; ++j) {
      int32_t r = slot_real(&g, j);
      wext[2 + j] = r < 0 ? 1 : wv.t->dims[wv.sp[r]];
    }
    iron_cudnn_tensor_t wsrc;
    view_tensor(&wv, &g, wext, zero_start,
                fwd ? IRON_CUDNN_BUF_RHS : IRON_CUDNN_BUF_OUT, &wsrc);
    out->w_src = wsrc.buf;
    if (fwd) {
      plan_input_filter(out, &g, IRON_CUDNN_BUF_RHS, false, 1, wext,
                        wsrc.strides);
    } else {
      iron_cudnn_tensor_t *w = &out->w;
      memset(w, 0, sizeof(*w));
      for (int32_t k = 0; k < nd; ++k) w->dims[k] = wext[k];
      filter_strides(w->dims, g.nspc, out->filter_format, w->strides);
      if (same_strides(nd, w->dims, wsrc.strides, w->strides)) {
        w->buf = IRON_CUDNN_BUF_OUT;
      } else {
        w->buf = add_stage(out, prod(nd, w->dims), false);
        iron_cudnn_copy_t *c = &out->post[out->num_post++];
        memset(c, 0, sizeof(*c));
        c->src_buf = w->buf;
        c->dst_buf = IRON_CUDNN_BUF_OUT;
        c->nd = nd;
        for (int32_t k = 0; k < nd; ++k) {
          c->dims[k] = w->dims[k];
          c->src_strides[k] = w->strides[k];
          c->dst_strides[k] = wsrc.strides[k];
        }
      }
    }
  } else {  // BACKWARD_DATA
    if (strided)
      return refuse(why, why_cap,
                    "backward_data: window strides > 1 with lhs_dilation");
    if (cp->batch_group_count != 1)
      return refuse(why, why_cap, "backward_data: batch_group_count > 1");
    out->mode =
        reversed ? IRON_CUDNN_CROSS_CORRELATION : IRON_CUDNN_CONVOLUTION;
    out->groups = cp->feature_group_count;
    // dy = lhs in place.
    view_t yv;
    view_init(&yv, lt, cp->in_batch_dim, cp->in_feature_dim, isp, g.nsp);
    int64_t yext[IRON_CUDNN_MAX_ND], zero_start[IRON_CUDNN_MAX_SP] = {0};
    yext[0] = lt->dims[cp->in_batch_dim];
    yext[1] = lt->dims[cp->in_feature_dim];
    sdim_t sd[IRON_CUDNN_MAX_SP];
    for (int32_t j = 0; j < g.nspc; ++j) {
      int32_t r = slot_real(&g, j);
      if (r < 0) {
        yext[2 + j] = 1;
        memset(&sd[j], 0, sizeof(sd[j]));
        sd[j].ext = sd[j].n = 1;
        continue;
      }
      yext[2 + j] = lt->dims[isp[r]];
      if (!scatter_dim(ot->dims[osp[r]], lt->dims[isp[r]], rt->dims[ksp[r]],
                       cp->lhs_dil[r], cp->rhs_dil[r], cp->pad[2 * r], &sd[j],
                       why, why_cap, r))
        return false;
      out->pad[j] = sd[j].pad;
      out->stride[j] = cp->lhs_dil[r];
      out->dilation[j] = cp->rhs_dil[r];
    }
    out->y_src = IRON_CUDNN_BUF_LHS;
    bool extra = false;
    for (int32_t j = 0; j < g.nspc; ++j) extra = extra || sd[j].extra > 0;
    if (!extra) {
      view_tensor(&yv, &g, yext, zero_start, IRON_CUDNN_BUF_LHS, &out->y);
    } else {
      // dy with zero elements appended: a zero-filled copy.
      iron_cudnn_tensor_t *y = &out->y;
      memset(y, 0, sizeof(*y));
      int64_t ext[IRON_CUDNN_MAX_ND];
      for (int32_t k = 0; k < nd; ++k)
        ext[k] = yext[k] + (k >= 2 ? sd[k - 2].extra : 0);
      for (int32_t k = 0; k < nd; ++k) y->dims[k] = ext[k];
      dense_like(&yv, &g, ext, y->strides);
      y->buf = add_stage(out, prod(nd, ext), true);
      iron_cudnn_tensor_t src;
      view_tensor(&yv, &g, yext, zero_start, IRON_CUDNN_BUF_LHS, &src);
      iron_cudnn_copy_t *c = &out->pre[out->num_pre++];
      memset(c, 0, sizeof(*c));
      c->src_buf = IRON_CUDNN_BUF_LHS;
      c->dst_buf = y->buf;
      c->nd = nd;
      for (int32_t k = 0; k < nd; ++k) {
        c->dims[k] = yext[k];
        c->src_strides[k] = src.strides[k];
        c->dst_strides[k] = y->strides[k];
      }
    }
    // dx: the result, in place or staged.
    view_t xv;
    view_init(&xv, ot, cp->out_batch_dim, cp->out_feature_dim, osp, g.nsp);
    int64_t xext[IRON_CUDNN_MAX_ND], box[IRON_CUDNN_MAX_ND],
        e_start[IRON_CUDNN_MAX_SP];
    xext[0] = box[0] = ot->dims[cp->out_batch_dim];
    xext[1] = box[1] = ot->dims[cp->out_feature_dim];
    bool stage = false, crop = false;
    for (int32_t j = 0; j < g.nspc; ++j) {
      int32_t r = slot_real(&g, j);
      xext[2 + j] = sd[j].ext;
      box[2 + j] = sd[j].n;
      e_start[j] = sd[j].e;
      stage = stage || sd[j].stage;
      int64_t jn = r < 0 ? 1 : ot->dims[osp[r]];
      out->out_zero = out->out_zero || sd[j].e > 0 || sd[j].n < jn;
      crop = crop || sd[j].e > 0 || sd[j].ext < jn;
    }
    if (packed && crop) stage = true;
    out->cropped = out->cropped || (crop && !stage);
    out->x_src = IRON_CUDNN_BUF_OUT;
    if (!stage) {
      view_tensor(&xv, &g, xext, e_start, IRON_CUDNN_BUF_OUT, &out->x);
    } else {
      iron_cudnn_tensor_t *x = &out->x;
      memset(x, 0, sizeof(*x));
      for (int32_t k = 0; k < nd; ++k) x->dims[k] = xext[k];
      dense_like(&xv, &g, xext, x->strides);
      x->buf = add_stage(out, prod(nd, xext), false);
    }
    if (stage && prod(nd, box) > 0) {
      const iron_cudnn_tensor_t *x = &out->x;
      iron_cudnn_tensor_t dst;
      view_tensor(&xv, &g, box, e_start, IRON_CUDNN_BUF_OUT, &dst);
      iron_cudnn_copy_t *c = &out->post[out->num_post++];
      memset(c, 0, sizeof(*c));
      c->src_buf = x->buf;
      c->dst_buf = IRON_CUDNN_BUF_OUT;
      c->nd = nd;
      c->dst_offset = dst.offset;
      for (int32_t k = 0; k < nd; ++k) {
        c->dims[k] = box[k];
        c->src_strides[k] = x->strides[k];
        c->dst_strides[k] = dst.strides[k];
      }
    }
    out->filter_format = out->y.strides[1] == 1 ? IRON_CUDNN_TENSOR_NHWC
                                                : IRON_CUDNN_TENSOR_NCHW;
    // w: K = dy's features = groups x kernel input features, C/G = the
    // kernel output features of one group; the kernel's own dims are
    // (input feature, output feature = group-major).
    const int64_t groups = cp->feature_group_count;
    const int64_t c_in_g = rt->dims[cp->k_in_feature_dim];
    const int64_t c_out_g = rt->dims[cp->k_out_feature_dim] / groups;
    int64_t fdims[IRON_CUDNN_MAX_ND], sst[IRON_CUDNN_COPY_MAX_ND];
    fdims[0] = groups * c_in_g;
    fdims[1] = c_out_g;
    const int64_t s_in = rst[cp->k_in_feature_dim],
                  s_out = rst[cp->k_out_feature_dim];
    int32_t o = 0;
    if (groups > 1) {
      sst[o++] = c_out_g * s_out;  // group
      sst[o++] = s_in;             // input feature in the group
    } else {
      sst[o++] = s_in;
    }
    sst[o++] = s_out;
    for (int32_t j = 0; j < g.nspc; ++j) {
      int32_t r = slot_real(&g, j);
      fdims[2 + j] = r < 0 ? 1 : rt->dims[ksp[r]];
      sst[o++] = r < 0 ? 1 : rst[ksp[r]];
    }
    plan_input_filter(out, &g, IRON_CUDNN_BUF_RHS, groups > 1, groups, fdims,
                      sst);
    out->w_src = IRON_CUDNN_BUF_RHS;
  }

  // cuDNN's descriptors hold ints; its kernels index 32-bit.
  for (int32_t j = 0; j < g.nspc; ++j)
    if (!fits_int(out->pad[j]) || !fits_int(out->stride[j]) ||
        !fits_int(out->dilation[j]))
      return refuse(why, why_cap, "window attributes beyond 32 bits");
  if (!tensor_fits(nd, &out->x) || !tensor_fits(nd, &out->w) ||
      !tensor_fits(nd, &out->y) || !fits_int(out->groups))
    return refuse(why, why_cap, "a tensor of 2^31 or more elements");
  return true;
}

// --- the staging copy kernel -------------------------------------------------

iron_status_t iron_cudnn_gen_copy(const char *name, size_t elem_size,
                                  const iron_cudnn_copy_t *c, char **out_src,
                                  unsigned *out_grid) {
  const char *t = elem_size == 2   ? "uint16_t"
                  : elem_size == 4 ? "uint32_t"
                  : elem_size == 8 ? "uint64_t"
                                   : NULL;
  if (!t || c->nd < 1 || c->nd > IRON_CUDNN_COPY_MAX_ND)
    return IRON_ERR(INTERNAL, "cudnn staging copy: element size %zu, %d dims",
                    elem_size, c->nd);
  int64_t count = 1;
  for (int32_t k = 0; k < c->nd; ++k) count *= c->dims[k];
  // 32-bit index arithmetic when every index fits (64-bit division is a
  // long instruction sequence on the GPU).
  int64_t slo, shi, dlo, dhi;
  index_range(c->nd, c->dims, c->src_offset, c->src_strides, &slo, &shi);
  index_range(c->nd, c->dims, c->dst_offset, c->dst_strides, &dlo, &dhi);
  // (Negative strides wrap around in unsigned arithmetic and still land on
  // the index, which is in range.)
  const bool narrow = count <= INT32_MAX && slo >= 0 && fits_int(shi) &&
                      dlo >= 0 && fits_int(dhi);
  const char *ix = narrow ? "uint32_t" : "int64_t";
  const char *sfx = narrow ? "u" : "LL";
  iron_cuda_text_t s;
  iron_cuda_text_init(&s);
  iron_cuda_text_printf(&s, "%s", iron_cuda_prelude());
  iron_cuda_text_printf(
      &s,
      "extern \"C\" __global__ void __launch_bounds__(256) %s(const %s "
      "*__restrict__ src, %s *__restrict__ dst) {\n"
      "for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; "
      "e < %lldLL; e += (int64_t)gridDim.x * blockDim.x) {\n"
      "%s r = (%s)e, si = %lld%s, di = %lld%s;\n",
      name, t, t, (long long)count, ix, ix, (long long)c->src_offset, sfx,
      (long long)c->dst_offset, sfx);
  for (int32_t k = c->nd - 1; k >= 1; --k)
    iron_cuda_text_printf(&s,
                          "{ const %s q = r %% %lld%s; r /= %lld%s; "
                          "si += q * %lld%s; di += q * %lld%s; }\n",
                          ix, (long long)c->dims[k], sfx, (long long)c->dims[k],
                          sfx, (long long)c->src_strides[k], sfx,
                          (long long)c->dst_strides[k], sfx);
  iron_cuda_text_printf(&s,
                        "si += r * %lld%s; di += r * %lld%s;\n"
                        "dst[di] = src[si];\n}\n}\n",
                        (long long)c->src_strides[0], sfx,
                        (long long)c->dst_strides[0], sfx);
  *out_grid = iron_cuda_ops_grid(count);
  return iron_cuda_text_finish(&s, out_src);
}
