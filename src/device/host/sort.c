// stablehlo.sort on the host.
//
// Every sort is a stable merge sort of an index permutation per row (a row is
// the 1-D slice along `dimension`), after which all operands are gathered
// through the permutation. Only the comparison differs between the paths:
//
//  - Fast path: prepare recognises the comparators jax emits
//    (src/device/plans/sort_keys.h, shared with the CUDA device). Keys are extracted into typed 64-bit values once per row and compared
//    with exactly the semantics of the IR (FLOAT: IEEE <, ==; TOTALORDER:
//    -NaN < -inf < ... < -0 < +0 < ... < inf < NaN; SIGNED; UNSIGNED), so
//    the fast path gives the same permutation as evaluating the region
//    would, whatever the data (NaNs included).
//  - Generic path: any other comparator is evaluated through
//    ctx->call_region on rank-0 views of the elements (slow, but correct).
//
// IRON_SORT_GENERIC=1 turns the fast path off (for A/B comparison);
// IRON_SORT_RADIX=0 keeps the fast path's keys but sorts them by merge sort
// instead of radix sort.
//
// is_stable=false is sorted stably as well (a stable order is a valid
// unstable one; XLA's own unstable order for ties is not reproduced).
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "device/host/ew_common.h"
#include "device/host/host_kernel.h"
#include "device/plans/sort_keys.h"

#define SORT_MAX_OPERANDS 64

typedef union key_val {
  int64_t s;
  uint64_t u;
  double d;
} key_val_t;

typedef struct sort_params {
  int32_t num_operands;
  int32_t rank;
  int64_t outer, n, inner;  // elements before / along / after `dimension`
  size_t elem_size[SORT_MAX_OPERANDS];
  bool fast;
  bool radix;  // fast path with only integer-ordered keys: LSD radix sort
  int32_t num_keys;
  iron_sort_key_t keys[IRON_SORT_MAX_KEYS];
  const iron_region_t *region;  // generic path
} sort_params_t;

// ---------------------------------------------------------------------------
// Stable merge sort of an index permutation.

typedef struct cmp_ctx cmp_ctx_t;
typedef bool (*less_fn_t)(cmp_ctx_t *c, int64_t i, int64_t j);

static void merge_sort(cmp_ctx_t *c, less_fn_t less, int64_t *a, int64_t *tmp,
                       int64_t n) {
  // Insertion-sort runs of 16 (stable: only strictly smaller moves left).
  const int64_t run = 16;
  for (int64_t lo = 0; lo < n; lo += run) {
    int64_t hi = lo + run < n ? lo + run : n;
    for (int64_t i = lo + 1; i < hi; ++i) {
      int64_t x = a[i], j = i;
      while (j > lo && less(c, x, a[j - 1])) {
        a[j] = a[j - 1];
        --j;
      }
      a[j] = x;
    }
  }
  int64_t *src = a, *dst = tmp;
  for (int64_t w = run; w < n; w *= 2) {
    for (int64_t lo = 0; lo < n; lo += 2 * w) {
      int64_t mid = lo + w < n ? lo + w : n;
      int64_t hi = lo + 2 * w < n ? lo + 2 * w : n;
      int64_t i = lo, j = mid, k = lo;
      // Take from the right only when strictly smaller: stable.
      while (i < mid && j < hi)
        dst[k++] = less(c, src[j], src[i]) ? src[j++] : src[i++];
      while (i < mid) dst[k++] = src[i++];
      while (j < hi) dst[k++] = src[j++];
    }
    int64_t *t = src;
    src = dst;
    dst = t;
  }
  if (src != a) memcpy(a, src, (size_t)n * sizeof(int64_t));
}

// ---------------------------------------------------------------------------
// LSD radix sort for keys whose order is an integer order (ints, and floats
// under TOTALORDER after canonicalisation): stable, so sorting by the last key
// first gives the lexicographic order. Keys are mapped to unsigned values in
// the same order and offset by their minimum, so only the bytes that vary
// within the row are passed over.

#define SORT_RADIX_MIN 64

static void radix_sort(const sort_params_t *p, const key_val_t *keys,
                       int64_t n, int64_t *perm, int64_t *tmp_idx,
                       uint64_t *val, uint64_t *tmp_val) {
  size_t nk = (size_t)p->num_keys;
  int64_t *cur = perm, *alt = tmp_idx;
  for (int32_t k = p->num_keys - 1; k >= 0; --k) {
    const iron_sort_key_t *key = &p->keys[k];
    uint64_t flip = key->mode == IRON_SORT_KEY_S64 ? (1ull << 63) : 0;
    uint64_t inv = key->descending ? ~0ull : 0;
    uint64_t mn = ~0ull, mx = 0;
    for (int64_t i = 0; i < n; ++i) {
      uint64_t v = (keys[(size_t)cur[i] * nk + (size_t)k].u ^ flip) ^ inv;
      val[i] = v;
      if (v < mn) mn = v;
      if (v > mx) mx = v;
    }
    uint64_t range = mx - mn;
    if (range == 0) continue;
    for (int64_t i = 0; i < n; ++i) val[i] -= mn;
    for (int shift = 0; shift < 64 && (range >> shift) != 0; shift += 8) {
      int64_t count[256] = {0};
      for (int64_t i = 0; i < n; ++i) count[(val[i] >> shift) & 255]++;
      int64_t off = 0;
      for (int b = 0; b < 256; ++b) {
        int64_t c = count[b];
        count[b] = off;
        off += c;
      }
      for (int64_t i = 0; i < n; ++i) {
        int64_t d = count[(val[i] >> shift) & 255]++;
        tmp_val[d] = val[i];
        alt[d] = cur[i];
      }
      uint64_t *tv = val;
      val = tmp_val;
      tmp_val = tv;
      int64_t *ti = cur;
      cur = alt;
      alt = ti;
    }
  }
  if (cur != perm) memcpy(perm, cur, (size_t)n * sizeof(int64_t));
}

// ---------------------------------------------------------------------------
// Run time

struct cmp_ctx {
  const sort_params_t *p;
  // Fast path: keys[t * num_keys + k] for element t of the row.
  const key_val_t *keys;
  // Generic path.
  const iron_kernel_ctx_t *hctx;
  const iron_tensor_t *const *inputs;
  int64_t row_base, stride;  // element offset of t = row_base + t * stride
  iron_tensor_t *args;       // 2N rank-0 views
  const iron_tensor_t **arg_ptrs;
  iron_tensor_t *result;
  iron_status_t status;
};

static uint64_t read_bits(const void *base, size_t elem_size, int32_t part,
                          size_t part_size, int64_t idx) {
  const unsigned char *p = (const unsigned char *)base + (size_t)idx * elem_size;
  if (part == 2) p += part_size;
  uint64_t v = 0;
  memcpy(&v, p, part ? part_size : elem_size);
  return v;
}

// f16 computes in f32, where its denormals are normal numbers; bf16's
// denormals stay denormal in f32.
static bool is_compute_denormal(double d, iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_F32:
    case IRON_DTYPE_BF16:
      return fpclassify((float)d) == FP_SUBNORMAL;
    case IRON_DTYPE_F64:
      return fpclassify(d) == FP_SUBNORMAL;
    default:
      return false;
  }
}

static key_val_t make_key(const iron_sort_key_t *k, uint64_t bits) {
  key_val_t out = {.u = 0};
  int nbits = k->nbits;
  if (k->num_canon) {
    double d = iron_sort_bits_to_double(bits, k->dtype);
    for (int32_t i = 0; i < k->num_canon; ++i) {
      const iron_sort_canon_step_t *st = &k->canon[i];
      bool hit = st->is_nan_test ? d != d : d == st->eq_value;
      if (!hit && k->daz && !st->is_nan_test && st->eq_value == 0)
        hit = is_compute_denormal(d, k->dtype);
      if (hit) {
        bits = st->repl_bits;
        break;
      }
    }
  }
  switch (k->mode) {
    case IRON_SORT_KEY_F64:
      out.d = iron_sort_bits_to_double(bits, k->dtype);
      break;
    case IRON_SORT_KEY_U64:
      out.u = bits;
      break;
    case IRON_SORT_KEY_S64: {
      // Sign-extend from the element width.
      int64_t s = nbits == 64 ? (int64_t)bits
                              : (int64_t)(bits << (64 - nbits)) >> (64 - nbits);
      if (k->is_float && s < 0)
        s ^= INT64_MAX;  // total order: negative floats reverse
      out.s = s;
      break;
    }
  }
  return out;
}

static bool fast_less(cmp_ctx_t *c, int64_t i, int64_t j) {
  const sort_params_t *p = c->p;
  const key_val_t *a = c->keys + i * p->num_keys;
  const key_val_t *b = c->keys + j * p->num_keys;
  for (int32_t k = 0; k < p->num_keys; ++k) {
    key_val_t x = a[k], y = b[k];
    if (p->keys[k].descending) {
      key_val_t t = x;
      x = y;
      y = t;
    }
    bool lt, eq;
    switch (p->keys[k].mode) {
      case IRON_SORT_KEY_S64: lt = x.s < y.s, eq = x.s == y.s; break;
      case IRON_SORT_KEY_U64: lt = x.u < y.u, eq = x.u == y.u; break;
      default: lt = x.d < y.d, eq = x.d == y.d; break;
    }
    if (lt) return true;
    if (!eq || k == p->num_keys - 1) return false;
  }
  return false;
}

static bool generic_less(cmp_ctx_t *c, int64_t i, int64_t j) {
  if (c->status) return false;
  const sort_params_t *p = c->p;
  int64_t ei = c->row_base + i * c->stride, ej = c->row_base + j * c->stride;
  for (int32_t k = 0; k < p->num_operands; ++k) {
    const unsigned char *base = (const unsigned char *)c->inputs[k]->data;
    c->args[2 * k].data = (void *)(base + (size_t)ei * p->elem_size[k]);
    c->args[2 * k + 1].data = (void *)(base + (size_t)ej * p->elem_size[k]);
  }
  iron_tensor_t *outs[1] = {c->result};
  c->status =
      c->hctx->call_region(c->hctx, c->p->region, c->arg_ptrs, outs);
  if (c->status) return false;
  return *(const unsigned char *)c->result->data != 0;
}

typedef struct sort_job {
  const sort_params_t *p;
  const iron_kernel_ctx_t *hctx;
  const iron_tensor_t *const *inputs;
  iron_tensor_t *const *outputs;
  atomic_int failed;  // 1: out of memory
  iron_status_t status;  // generic path error (single-threaded)
} sort_job_t;

static void gather_row(const sort_params_t *p, const iron_tensor_t *const *in,
                       iron_tensor_t *const *out, int64_t row_base,
                       const int64_t *perm) {
  int64_t s = p->inner;
  for (int32_t k = 0; k < p->num_operands; ++k) {
    size_t es = p->elem_size[k];
    const unsigned char *src = (const unsigned char *)in[k]->data;
    unsigned char *dst = (unsigned char *)out[k]->data;
    for (int64_t t = 0; t < p->n; ++t) {
      size_t d = (size_t)(row_base + t * s) * es;
      size_t from = (size_t)(row_base + perm[t] * s) * es;
      switch (es) {
        case 1: dst[d] = src[from]; break;
        case 2: memcpy(dst + d, src + from, 2); break;
        case 4: memcpy(dst + d, src + from, 4); break;
        case 8: memcpy(dst + d, src + from, 8); break;
        default: memcpy(dst + d, src + from, es); break;
      }
    }
  }
}

static void sort_rows(void *arg, int64_t begin, int64_t end) {
  sort_job_t *job = (sort_job_t *)arg;
  const sort_params_t *p = job->p;
  int64_t n = p->n;
  size_t nk = p->fast ? (size_t)p->num_keys : 0;
  int64_t *perm = (int64_t *)malloc((size_t)n * 2 * sizeof(int64_t));
  key_val_t *keys = nk ? (key_val_t *)malloc((size_t)n * nk * sizeof(key_val_t))
                       : NULL;
  bool radix = p->radix && n >= SORT_RADIX_MIN;
  uint64_t *vals = radix ? (uint64_t *)malloc((size_t)n * 2 * sizeof(uint64_t))
                         : NULL;
  iron_tensor_t *args = NULL;
  const iron_tensor_t **arg_ptrs = NULL;
  iron_tensor_t result;
  unsigned char result_byte = 0;
  if (!p->fast) {
    args = (iron_tensor_t *)calloc((size_t)p->num_operands * 2, sizeof(*args));
    arg_ptrs = (const iron_tensor_t **)calloc((size_t)p->num_operands * 2,
                                              sizeof(*arg_ptrs));
  }
  if (!perm || (nk && !keys) || (radix && !vals) ||
      (!p->fast && (!args || !arg_ptrs))) {
    atomic_store(&job->failed, 1);
    goto done;
  }
  cmp_ctx_t c = {.p = p, .keys = keys, .hctx = job->hctx,
                 .inputs = job->inputs, .stride = p->inner};
  if (!p->fast) {
    for (int32_t k = 0; k < 2 * p->num_operands; ++k) {
      iron_tensor_t *t = &args[k];
      t->dtype = job->inputs[k / 2]->dtype;
      t->rank = 0;
      t->count = 1;
      t->nbytes = p->elem_size[k / 2];
      arg_ptrs[k] = t;
    }
    memset(&result, 0, sizeof(result));
    result.data = &result_byte;
    result.dtype = IRON_DTYPE_PRED;
    result.count = 1;
    result.nbytes = 1;
    c.args = args;
    c.arg_ptrs = arg_ptrs;
    c.result = &result;
  }
  for (int64_t row = begin; row < end; ++row) {
    int64_t o = row / p->inner, in = row % p->inner;
    int64_t row_base = o * n * p->inner + in;
    c.row_base = row_base;
    for (int64_t t = 0; t < n; ++t) perm[t] = t;
    if (p->fast) {
      for (int64_t t = 0; t < n; ++t) {
        for (size_t k = 0; k < nk; ++k) {
          const iron_sort_key_t *key = &p->keys[k];
          uint64_t bits = read_bits(job->inputs[key->operand]->data,
                                    key->elem_size, key->part,
                                    key->part_size,
                                    row_base + t * p->inner);
          keys[(size_t)t * nk + k] = make_key(key, bits);
        }
      }
      if (radix)
        radix_sort(p, keys, n, perm, perm + n, vals, vals + n);
      else
        merge_sort(&c, fast_less, perm, perm + n, n);
    } else {
      merge_sort(&c, generic_less, perm, perm + n, n);
      if (c.status) {
        job->status = c.status;
        goto done;
      }
    }
    gather_row(p, job->inputs, job->outputs, row_base, perm);
  }
done:
  free(perm);
  free(keys);
  free(vals);
  free(args);
  free(arg_ptrs);
}

static iron_status_t sort_run(const iron_kernel_ctx_t *ctx, const void *params,
                              const iron_tensor_t *const *inputs,
                              iron_tensor_t *const *outputs) {
  const sort_params_t *p = (const sort_params_t *)params;
  int64_t rows = p->outer * p->inner;
  if (rows == 0 || p->n == 0) return IRON_OK;
  sort_job_t job = {.p = p, .hctx = ctx, .inputs = inputs,
                    .outputs = outputs};
  atomic_init(&job.failed, 0);
  if (p->fast) {
    int64_t grain = 16384 / p->n;
    iron_threadpool_parallel_for(ctx ? ctx->pool : NULL, rows,
                                 grain > 0 ? grain : 1, sort_rows, &job);
  } else {
    if (!ctx || !ctx->call_region)
      return IRON_ERR(FAILED_PRECONDITION,
                      "stablehlo.sort: comparator needs call_region");
    // One thread: the region evaluator is not assumed re-entrant.
    sort_rows(&job, 0, rows);
    if (job.status)
      return iron_status_annotate(job.status, "stablehlo.sort comparator");
  }
  if (atomic_load(&job.failed))
    return IRON_ERR(RESOURCE_EXHAUSTED, "stablehlo.sort: out of memory");
  return IRON_OK;
}

static iron_status_t sort_prepare(const iron_ir_op_t *op,
                                  iron_region_t *const *regions,
                                  void **out_params) {
  *out_params = NULL;
  uint32_t n_ops = op->num_operands;
  if (n_ops == 0 || n_ops > SORT_MAX_OPERANDS || op->num_results != n_ops)
    return iron_ir_op_unimplemented(op, "with %u operands", n_ops);
  const iron_ir_type_t *t0 = op->operands[0]->type;
  if (t0->kind != IRON_TYPE_TENSOR || !iron_ir_type_is_static(t0))
    return iron_ir_op_unimplemented(op, "for non-static shapes");
  sort_params_t *p = (sort_params_t *)calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  iron_status_t st = IRON_OK;
  p->num_operands = (int32_t)n_ops;
  p->rank = t0->rank;
  for (uint32_t k = 0; k < n_ops; ++k) {
    const iron_ir_type_t *t = op->operands[k]->type;
    if (t->kind != IRON_TYPE_TENSOR || t->rank != t0->rank ||
        !iron_ir_type_equal(t, op->results[k].type)) {
      st = IRON_ERR(INVALID_ARGUMENT,
                    "stablehlo.sort: operand %u type differs from its result "
                    "or from operand 0",
                    k);
      goto fail;
    }
    for (int32_t d = 0; d < t->rank; ++d)
      if (t->dims[d] != t0->dims[d]) {
        st = IRON_ERR(INVALID_ARGUMENT,
                      "stablehlo.sort: operand shapes differ");
        goto fail;
      }
    p->elem_size[k] = iron_dtype_size(t->dtype);
    if (p->elem_size[k] == 0) {
      st = iron_ir_op_unimplemented(op, "for dtype %s",
                                    iron_dtype_name(t->dtype));
      goto fail;
    }
  }
  int64_t dim = 0;
  const iron_ir_attr_t *da = iron_ir_op_attr(op, "dimension");
  if (da && !iron_ir_attr_as_i64(da, &dim)) {
    st = IRON_ERR(INVALID_ARGUMENT, "stablehlo.sort: bad dimension");
    goto fail;
  }
  if (dim < 0) dim += t0->rank;
  if (t0->rank > 0 && (dim < 0 || dim >= t0->rank)) {
    st = IRON_ERR(INVALID_ARGUMENT,
                  "stablehlo.sort: dimension %lld out of range for rank %d",
                  (long long)dim, t0->rank);
    goto fail;
  }
  p->outer = 1, p->n = 1, p->inner = 1;
  for (int32_t d = 0; d < t0->rank; ++d) {
    if (d < dim) p->outer *= t0->dims[d];
    else if (d == dim) p->n = t0->dims[d];
    else p->inner *= t0->dims[d];
  }
  st = iron_sort_check_comparator(op);
  if (st) goto fail;
  const char *env = getenv("IRON_SORT_GENERIC");
  bool allow_fast = !(env && env[0] && env[0] != '0');
  iron_sort_keys_t matched;
  p->fast = allow_fast && iron_sort_keys_match(op, &matched);
  if (p->fast) {
    p->num_keys = matched.num_keys;
    memcpy(p->keys, matched.keys, sizeof(p->keys));
    for (int32_t k = 0; k < p->num_keys; ++k)
      p->keys[k].daz = iron_ew_flush_enabled();
    const char *renv = getenv("IRON_SORT_RADIX");
    p->radix = !(renv && renv[0] == '0');
    for (int32_t k = 0; k < p->num_keys; ++k)
      if (p->keys[k].mode == IRON_SORT_KEY_F64) p->radix = false;
  }
  if (!p->fast) {
    p->num_keys = 0;
    if (!regions || !regions[0]) {
      st = iron_ir_op_unimplemented(
          op, "with this comparator (no compiled region to call)");
      goto fail;
    }
    p->region = regions[0];
  }
  *out_params = p;
  return IRON_OK;
fail:
  free(p);
  return st;
}

static const iron_kernel_t kSort = {
    /* .name = */ "sort",
    /* .prepare = */ sort_prepare,
    /* .run = */ sort_run,
    /* .destroy = */ NULL,
    /* .inplace_ok = */ false,
    /* .elementwise = */ false,
};

void iron_host_register_sort(iron_kernel_table_t table) {
  table[IRON_OP_SORT] = &kSort;
}
