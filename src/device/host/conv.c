// stablehlo.convolution on the host, generic over the number of spatial
// dimensions and every attribute: dimension numbers (any layout), window
// strides, padding (negative too), lhs dilation (transposed convolutions),
// rhs dilation, window reversal, feature groups and batch groups.
//
// Semantics (checked against XLA:CPU through jax): for output batch ob,
// output feature of (in group g) and output position o, the result sums
//   lhs[g_b * N_out + ob, g_f * Ci + ci, i] * rhs[of, ci, k]
// over kernel input features ci and kernel positions k where, per spatial
// dim, p = o * stride + kw * rhs_dilation - pad_lo (kw = k, or K-1-k when
// reversed) lands on a real element of the lhs-dilated input (p >= 0,
// p % lhs_dilation == 0, i = p / lhs_dilation < in). Feature groups split
// the lhs features and the kernel output features into G groups; batch
// groups split the lhs batch and the kernel output features.
//
// Numerics follow XLA:CPU: f16/bf16 are accumulated in f32 and rounded once;
// integers (and bool) are accumulated with wrap-around in 64 bits and
// truncated to the result type, which is what wrapping in the narrower type
// gives; operands are converted to the accumulation type of the *result*
// dtype first (preferred_element_type: s8 x s8 -> s32 widens before the
// products, as XLA:CPU does).
//
// Two paths: direct loops (any case), and im2col + the host GEMM
// (dot_gemm.h), which packs each group's input windows as rows [M, K] (K =
// kernel positions x kernel input features) and multiplies them by the
// packed kernel [K, Cout/G], in chunks of rows (and of kernel positions when
// one row alone is large, summing the partial products) that fit
// IRON_HOST_CONV_PATCH_BYTES. The GEMM path handles every case; it is used
// when each group has at least 4 output features (narrower groups, as in
// depthwise convolutions, are faster direct). IRON_HOST_CONV_FAST=0 (read
// at prepare) selects the direct loops everywhere for A/B comparison.
#include <stdlib.h>
#include <string.h>

#include "base/half.h"
#include "device/plans/conv_plan.h"
#include "device/host/dot_gemm.h"
#include "device/host/ew_narrow.h"
#include "device/plans/dot_plan.h"
#include "device/host/host_kernel.h"

#define CONV_MAX_SP (IRON_MAX_RANK - 2)
// Upper bound of the im2col scratch per chunk (bytes); the default of
// IRON_HOST_CONV_PATCH_BYTES (tests set it tiny to exercise the chunking).
#define CONV_PATCH_BYTES ((int64_t)8 << 20)

typedef struct conv_params {
  iron_dtype_t lhs_dtype, rhs_dtype, out_dtype, comp_dtype;
  iron_host_gemm_type_t gemm_type;
  bool fast;
  int64_t patch_bytes; // im2col scratch bound
  int32_t nsp;
  int64_t groups;         // feature_group_count * batch_group_count
  bool batch_groups;      // groups split the lhs batch (else its features)
  int64_t n_out, c_in_g;  // output batch; kernel input features
  int64_t c_out, c_out_g; // output features; per group
  int64_t lhs_count, rhs_count, out_count;
  int64_t in_bs, in_fs;   // lhs strides (elements) of batch / feature
  int64_t k_is, k_os;     // rhs strides of input / output feature
  int64_t out_bs, out_fs; // result strides of batch / feature
  int64_t out_sp[CONV_MAX_SP], k_sp[CONV_MAX_SP];
  int64_t k_ss[CONV_MAX_SP], out_ss[CONV_MAX_SP];
  int64_t os_count, ks_count; // products of output / kernel spatial dims
  // Per spatial dim d, the window: output position o meets, at kernel
  // position k (reversed when rev[d]), lhs position
  // o * stride + k * rhs_dil - pad_lo, a hole unless a multiple of lhs_dil,
  // padding outside [0, in_sp * lhs_dil). Computed per use, not tabulated:
  // a table of out x kernel positions per dim grows without bound with the
  // program's declared sizes (issue 13).
  int64_t in_sp[CONV_MAX_SP], in_ss[CONV_MAX_SP];
  int64_t stride[CONV_MAX_SP], rhs_dil[CONV_MAX_SP], lhs_dil[CONV_MAX_SP],
      pad_lo[CONV_MAX_SP];
  bool rev[CONV_MAX_SP];
  // The result is rows [n_out, out spatial...] x features, row-major with
  // the features innermost: the GEMM may write it in place (one group).
  bool out_rows_contiguous;
} conv_params_t;

static void conv_destroy(void *params) {
  conv_params_t *p = params;
  if (!p)
    return;
  free(p);
}

static int64_t patch_bytes(void) {
  const char *e = getenv("IRON_HOST_CONV_PATCH_BYTES");
  long long v = e ? atoll(e) : 0;
  return v > 0 ? (int64_t)v : CONV_PATCH_BYTES;
}

static bool fast_enabled(void) {
  const char *e = getenv("IRON_HOST_CONV_FAST");
  return !(e && e[0] == '0');
}

// Element i of a supported operand dtype as (re, im) or an integer.
static void load_elem(const void *p, iron_dtype_t dt, int64_t i, double *re,
                      double *im, int64_t *iv) {
  *im = 0;
  const uint8_t *b = p;
  switch (dt) {
  case IRON_DTYPE_PRED:
  case IRON_DTYPE_U8:
    *iv = b[i];
    break;
  case IRON_DTYPE_S8:
    *iv = ((const int8_t *)p)[i];
    break;
  // Sub-byte ints: the low bits of a byte (ml_dtypes' layout).
  case IRON_DTYPE_S4:
    *iv = (int8_t)(uint8_t)(b[i] << 4) >> 4;
    break;
  case IRON_DTYPE_S2:
    *iv = (int8_t)(uint8_t)(b[i] << 6) >> 6;
    break;
  case IRON_DTYPE_U4:
    *iv = b[i] & 0xf;
    break;
  case IRON_DTYPE_U2:
    *iv = b[i] & 0x3;
    break;
  case IRON_DTYPE_S16:
    *iv = ((const int16_t *)p)[i];
    break;
  case IRON_DTYPE_U16:
    *iv = ((const uint16_t *)p)[i];
    break;
  case IRON_DTYPE_S32:
    *iv = ((const int32_t *)p)[i];
    break;
  case IRON_DTYPE_U32:
    *iv = ((const uint32_t *)p)[i];
    break;
  case IRON_DTYPE_S64:
  case IRON_DTYPE_U64:
    *iv = ((const int64_t *)p)[i];
    break;
  case IRON_DTYPE_F16:
    *re = iron_f16_to_f32(((const uint16_t *)p)[i]);
    return;
  case IRON_DTYPE_BF16:
    *re = iron_bf16_to_f32(((const uint16_t *)p)[i]);
    return;
  case IRON_DTYPE_F32:
    *re = ((const float *)p)[i];
    return;
  case IRON_DTYPE_F64:
    *re = ((const double *)p)[i];
    return;
  case IRON_DTYPE_C64:
    *re = ((const float *)p)[2 * i];
    *im = ((const float *)p)[2 * i + 1];
    return;
  case IRON_DTYPE_C128:
    *re = ((const double *)p)[2 * i];
    *im = ((const double *)p)[2 * i + 1];
    return;
  default:
    if (iron_dot_plan_narrow_is(dt)) { // f8/f4 (operand_ok)
      *re = iron_ew_narrow_dot_load(dt, b[i]);
      return;
    }
    *iv = 0;
    break;
  }
  *re = dt == IRON_DTYPE_U64 ? (double)(uint64_t)*iv : (double)*iv;
}

typedef struct convert_job {
  const void *src;
  iron_dtype_t sdt, cdt;
  void *dst;
} convert_job_t;

static void convert_chunk(void *arg, int64_t begin, int64_t end) {
  const convert_job_t *j = arg;
  if (j->sdt == IRON_DTYPE_F16 && j->cdt == IRON_DTYPE_F32) {
    for (int64_t i = begin; i < end; ++i)
      ((float *)j->dst)[i] = iron_f16_to_f32(((const uint16_t *)j->src)[i]);
    return;
  }
  if (j->sdt == IRON_DTYPE_BF16 && j->cdt == IRON_DTYPE_F32) {
    for (int64_t i = begin; i < end; ++i)
      ((float *)j->dst)[i] = iron_bf16_to_f32(((const uint16_t *)j->src)[i]);
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    double re = 0, im = 0;
    int64_t iv = 0;
    load_elem(j->src, j->sdt, i, &re, &im, &iv);
    switch (j->cdt) {
    case IRON_DTYPE_F32:
      ((float *)j->dst)[i] = (float)re;
      break;
    case IRON_DTYPE_F64:
      ((double *)j->dst)[i] = re;
      break;
    case IRON_DTYPE_C64:
      ((float *)j->dst)[2 * i] = (float)re;
      ((float *)j->dst)[2 * i + 1] = (float)im;
      break;
    case IRON_DTYPE_C128:
      ((double *)j->dst)[2 * i] = re;
      ((double *)j->dst)[2 * i + 1] = im;
      break;
    default:
      ((int64_t *)j->dst)[i] = iv;
      break;
    }
  }
}

// Stores element `si` of a compute-dtype array as element `di` of `dst`.
static inline void store_elem(const void *src, iron_dtype_t cdt, int64_t si,
                              void *dst, iron_dtype_t odt, int64_t di) {
  size_t es = iron_dtype_size(odt);
  if (odt == cdt) {
    memcpy((char *)dst + (size_t)di * es, (const char *)src + (size_t)si * es,
           es);
    return;
  }
  switch (odt) {
  case IRON_DTYPE_F16:
    ((uint16_t *)dst)[di] = iron_f32_to_f16(((const float *)src)[si]);
    return;
  case IRON_DTYPE_BF16:
    ((uint16_t *)dst)[di] = iron_f32_to_bf16(((const float *)src)[si]);
    return;
  case IRON_DTYPE_PRED:
    ((uint8_t *)dst)[di] = ((const int64_t *)src)[si] != 0;
    return;
  default: {
    if (iron_dot_plan_narrow_is(odt)) {
      ((uint8_t *)dst)[di] =
          iron_ew_narrow_dot_store(odt, ((const float *)src)[si]);
      return;
    }
    // integers: keep the low bytes (wrap around; s4/u4/s2/u2 the low bits);
    // little-endian
    int64_t v = ((const int64_t *)src)[si];
    int bits = iron_dtype_bits(odt);
    if (bits < 8) v &= ((int64_t)1 << bits) - 1;
    memcpy((char *)dst + (size_t)di * es, &v, es);
    return;
  }
  }
}

// ---------------------------------------------------------------------------
// Prepare

// True when the result's rows (batch, then spatial dims in order) times the
// features form the row-major layout [rows, features].
static bool rows_contiguous(const conv_params_t *p, int64_t out_b_size) {
  int64_t expect = 1;
  if (p->c_out != 1) {
    if (p->out_fs != 1)
      return false;
    expect = p->c_out;
  }
  for (int32_t d = p->nsp - 1; d >= -1; --d) {
    int64_t size = d >= 0 ? p->out_sp[d] : out_b_size;
    int64_t stride = d >= 0 ? p->out_ss[d] : p->out_bs;
    if (size == 1)
      continue;
    if (stride != expect)
      return false;
    expect *= size;
  }
  return true;
}

static iron_status_t conv_prepare(const iron_ir_op_t *op,
                                  iron_region_t *const *regions,
                                  void **out_params) {
  (void)regions;
  iron_conv_plan_t cp;
  IRON_RETURN_IF_ERROR_PLAIN(iron_conv_plan_read(op, &cp));
  const iron_ir_type_t *lt = cp.lhs, *rt = cp.rhs, *ot = cp.out;
  const iron_dtype_t comp = cp.comp_dtype;
  const int32_t rank = cp.rank, nsp = cp.nsp;
  const int64_t ib = cp.in_batch_dim, ifd = cp.in_feature_dim;
  const int64_t kif = cp.k_in_feature_dim, kof = cp.k_out_feature_dim;
  const int64_t ob = cp.out_batch_dim, ofd = cp.out_feature_dim;
  const int64_t *isp = cp.in_sp_dim, *ksp = cp.k_sp_dim, *osp = cp.out_sp_dim;
  const int64_t *strides = cp.stride, *pad = cp.pad, *ldil = cp.lhs_dil,
                *rdil = cp.rhs_dil, *rev = cp.reversal;

  conv_params_t *p = calloc(1, sizeof(*p));
  if (!p)
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for params");
  p->lhs_dtype = lt->dtype;
  p->rhs_dtype = rt->dtype;
  p->out_dtype = ot->dtype;
  p->comp_dtype = comp;
  switch (comp) {
  case IRON_DTYPE_F32:
    p->gemm_type = IRON_HOST_GEMM_F32;
    break;
  case IRON_DTYPE_F64:
    p->gemm_type = IRON_HOST_GEMM_F64;
    break;
  case IRON_DTYPE_C64:
    p->gemm_type = IRON_HOST_GEMM_C64;
    break;
  case IRON_DTYPE_C128:
    p->gemm_type = IRON_HOST_GEMM_C128;
    break;
  default:
    p->gemm_type = IRON_HOST_GEMM_S64;
    break;
  }
  p->fast = fast_enabled();
  p->patch_bytes = patch_bytes();
  p->nsp = nsp;
  p->groups = cp.groups;
  p->batch_groups = cp.batch_group_count > 1;
  p->n_out = cp.n_out;
  p->c_in_g = cp.c_in_g;
  p->c_out = cp.c_out;
  p->c_out_g = cp.c_out_g;
  p->lhs_count = iron_ir_type_num_elements(lt);
  p->rhs_count = iron_ir_type_num_elements(rt);
  p->out_count = iron_ir_type_num_elements(ot);
  int64_t ls[IRON_MAX_RANK], ks[IRON_MAX_RANK], os[IRON_MAX_RANK];
  iron_tensor_t tmp;
  tmp.rank = rank;
  memcpy(tmp.dims, lt->dims, sizeof(tmp.dims));
  iron_tensor_strides(&tmp, ls);
  memcpy(tmp.dims, rt->dims, sizeof(tmp.dims));
  iron_tensor_strides(&tmp, ks);
  memcpy(tmp.dims, ot->dims, sizeof(tmp.dims));
  iron_tensor_strides(&tmp, os);
  p->in_bs = ls[ib];
  p->in_fs = ls[ifd];
  p->k_is = ks[kif];
  p->k_os = ks[kof];
  p->out_bs = os[ob];
  p->out_fs = os[ofd];
  p->os_count = 1;
  p->ks_count = 1;
  for (int32_t d = 0; d < nsp; ++d) {
    // Result spatial sizes checked by iron_conv_plan_read.
    int64_t k = rt->dims[ksp[d]], o = ot->dims[osp[d]];
    p->out_sp[d] = o;
    p->k_sp[d] = k;
    p->k_ss[d] = ks[ksp[d]];
    p->out_ss[d] = os[osp[d]];
    p->os_count *= o;
    p->ks_count *= k;
    p->in_sp[d] = lt->dims[isp[d]];
    p->in_ss[d] = ls[isp[d]];
    p->stride[d] = strides[d];
    p->rhs_dil[d] = rdil[d];
    p->lhs_dil[d] = ldil[d];
    p->pad_lo[d] = pad[2 * d];
    p->rev[d] = rev[d] != 0;
  }
  p->out_rows_contiguous = rows_contiguous(p, ot->dims[ob]);
  *out_params = p;
  return IRON_OK;
}

// ---------------------------------------------------------------------------
// Run

typedef struct conv_job {
  const conv_params_t *p;
  const void *lhs; // compute dtype
  const void *rhs; // compute dtype (reference) / packed [G, K, Cout/G]
  void *out;
  void *patches; // [G, rows, K]
  void *c;       // [G, rows, Cout/G]
  int64_t row0;  // first row of the chunk
  int64_t rows;  // rows in the chunk
  int64_t kp0;   // first kernel position of the chunk (row-major)
  int64_t kpn;   // kernel positions in the chunk
} conv_job_t;

// Splits row r into its batch index and the lhs spatial offset of each
// output position; returns the output spatial offset of the row.
static int64_t row_coords(const conv_params_t *p, int64_t r, int64_t *out_b,
                          int64_t *o) {
  int64_t rem = r % p->os_count, off = 0;
  *out_b = r / p->os_count;
  for (int32_t d = p->nsp - 1; d >= 0; --d) {
    o[d] = rem % p->out_sp[d];
    rem /= p->out_sp[d];
    off += o[d] * p->out_ss[d];
  }
  return off + *out_b * p->out_bs;
}

// lhs offset of batch `b` / group `g`'s first feature.
static inline int64_t lhs_base(const conv_params_t *p, int64_t b, int64_t g) {
  return p->batch_groups ? (g * p->n_out + b) * p->in_bs
                         : b * p->in_bs + g * p->c_in_g * p->in_fs;
}

// Advances the kernel position odometer; returns false after the last one.
static inline bool next_window(const conv_params_t *p, int64_t *k) {
  for (int32_t d = p->nsp - 1; d >= 0; --d) {
    if (++k[d] < p->k_sp[d])
      return true;
    k[d] = 0;
  }
  return false;
}

static inline int64_t window_offset(const conv_params_t *p, const int64_t *o,
                                    const int64_t *k, int64_t *k_off) {
  int64_t off = 0, ko = 0;
  for (int32_t d = 0; d < p->nsp; ++d) {
    int64_t kw = p->rev[d] ? p->k_sp[d] - 1 - k[d] : k[d];
    int64_t pos = o[d] * p->stride[d] + kw * p->rhs_dil[d] - p->pad_lo[d];
    if (pos < 0)
      return -1;
    if (p->lhs_dil[d] != 1) {
      if (pos % p->lhs_dil[d] != 0)
        return -1;
      pos /= p->lhs_dil[d];
    }
    if (pos >= p->in_sp[d])
      return -1;
    off += pos * p->in_ss[d];
    ko += k[d] * p->k_ss[d];
  }
  *k_off = ko;
  return off;
}

// Reference loops: every output element on its own, in the compute dtype.
#define CONV_REF(NAME, T, ZERO, MULADD)                                        \
  static void NAME(const conv_job_t *j, int64_t r, T *acc) {                   \
    const conv_params_t *p = j->p;                                             \
    const T *x = j->lhs, *w = j->rhs;                                          \
    int64_t o[CONV_MAX_SP], k[CONV_MAX_SP], b;                                 \
    (void)row_coords(p, r, &b, o);                                             \
    for (int64_t f = 0; f < p->c_out; ++f)                                     \
      acc[f] = ZERO;                                                           \
    if (p->ks_count == 0 || p->c_in_g == 0)                                    \
      return;                                                                  \
    for (int32_t d = 0; d < p->nsp; ++d)                                       \
      k[d] = 0;                                                                \
    do {                                                                       \
      int64_t k_off = 0;                                                       \
      int64_t sp = window_offset(p, o, k, &k_off);                             \
      if (sp < 0)                                                              \
        continue;                                                              \
      for (int64_t f = 0; f < p->c_out; ++f) {                                 \
        int64_t g = f / p->c_out_g;                                            \
        const T *xp = x + lhs_base(p, b, g) + sp;                              \
        const T *wp = w + f * p->k_os + k_off;                                 \
        T s = acc[f];                                                          \
        for (int64_t c = 0; c < p->c_in_g; ++c) {                              \
          T a = xp[c * p->in_fs], bb = wp[c * p->k_is];                        \
          MULADD;                                                              \
        }                                                                      \
        acc[f] = s;                                                            \
      }                                                                        \
    } while (next_window(p, k));                                               \
  }

typedef struct cf32 {
  float re, im;
} cf32_t;
typedef struct cf64 {
  double re, im;
} cf64_t;

CONV_REF(ref_f32, float, 0.0f, s += a * bb)
CONV_REF(ref_f64, double, 0.0, s += a * bb)
CONV_REF(ref_s64, uint64_t, 0u, s += a * bb)
CONV_REF(ref_c64, cf32_t, ((cf32_t){0.0f, 0.0f}),
         s.re += a.re * bb.re - a.im * bb.im;
         s.im += a.re * bb.im + a.im * bb.re)
CONV_REF(ref_c128, cf64_t, ((cf64_t){0.0, 0.0}),
         s.re += a.re * bb.re - a.im * bb.im;
         s.im += a.re * bb.im + a.im * bb.re)

static void ref_rows(void *arg, int64_t begin, int64_t end) {
  const conv_job_t *j = arg;
  const conv_params_t *p = j->p;
  size_t ces = iron_dtype_size(p->comp_dtype);
  // One row of accumulators (every output feature) per call.
  char *acc = (char *)j->c + (size_t)begin * (size_t)p->c_out * ces;
  for (int64_t r = begin; r < end; ++r) {
    switch (p->comp_dtype) {
    case IRON_DTYPE_F32:
      ref_f32(j, r, (float *)(void *)acc);
      break;
    case IRON_DTYPE_F64:
      ref_f64(j, r, (double *)(void *)acc);
      break;
    case IRON_DTYPE_C64:
      ref_c64(j, r, (cf32_t *)(void *)acc);
      break;
    case IRON_DTYPE_C128:
      ref_c128(j, r, (cf64_t *)(void *)acc);
      break;
    default:
      ref_s64(j, r, (uint64_t *)(void *)acc);
      break;
    }
    int64_t o[CONV_MAX_SP], b;
    int64_t out_off = row_coords(p, r, &b, o);
    for (int64_t f = 0; f < p->c_out; ++f)
      store_elem(acc, p->comp_dtype, f, j->out, p->out_dtype,
                 out_off + f * p->out_fs);
  }
}

// im2col: patches[g, r - row0, (kpos - kp0) * Cin_g + c] for rows
// [begin, end) of the chunk and its kernel positions (zeros for padding and
// holes).
static void fill_rows(void *arg, int64_t begin, int64_t end) {
  const conv_job_t *j = arg;
  const conv_params_t *p = j->p;
  size_t ces = iron_dtype_size(p->comp_dtype);
  int64_t kdim = j->kpn * p->c_in_g;
  const char *x = j->lhs;
  int64_t k0[CONV_MAX_SP], rem = j->kp0;
  for (int32_t d = p->nsp - 1; d >= 0; --d) {
    k0[d] = rem % p->k_sp[d];
    rem /= p->k_sp[d];
  }
  for (int64_t rr = begin; rr < end; ++rr) {
    int64_t o[CONV_MAX_SP], k[CONV_MAX_SP], b;
    (void)row_coords(p, j->row0 + rr, &b, o);
    for (int64_t g = 0; g < p->groups; ++g) {
      char *dst =
          (char *)j->patches + (size_t)((g * j->rows + rr) * kdim) * ces;
      const char *xb = x + (size_t)lhs_base(p, b, g) * ces;
      for (int32_t d = 0; d < p->nsp; ++d)
        k[d] = k0[d];
      int64_t left = j->kpn;
      do {
        int64_t k_off;
        int64_t sp = window_offset(p, o, k, &k_off);
        size_t n = (size_t)p->c_in_g * ces;
        if (sp < 0) {
          memset(dst, 0, n);
        } else if (p->in_fs == 1) {
          memcpy(dst, xb + (size_t)sp * ces, n);
        } else {
          const char *src = xb + (size_t)sp * ces;
          size_t step = (size_t)p->in_fs * ces;
          switch (ces) {
          case 4:
            for (int64_t c = 0; c < p->c_in_g; ++c)
              memcpy(dst + c * 4, src + c * step, 4);
            break;
          case 8:
            for (int64_t c = 0; c < p->c_in_g; ++c)
              memcpy(dst + c * 8, src + c * step, 8);
            break;
          default:
            for (int64_t c = 0; c < p->c_in_g; ++c)
              memcpy(dst + c * ces, src + c * step, ces);
            break;
          }
        }
        dst += n;
      } while (--left > 0 && next_window(p, k));
    }
  }
}

// Writes GEMM results c[g, r - row0, j] to the result (converting).
static void scatter_rows(void *arg, int64_t begin, int64_t end) {
  const conv_job_t *j = arg;
  const conv_params_t *p = j->p;
  for (int64_t rr = begin; rr < end; ++rr) {
    int64_t o[CONV_MAX_SP], b;
    int64_t out_off = row_coords(p, j->row0 + rr, &b, o);
    for (int64_t g = 0; g < p->groups; ++g) {
      int64_t src = (g * j->rows + rr) * p->c_out_g;
      for (int64_t f = 0; f < p->c_out_g; ++f)
        store_elem(j->c, p->comp_dtype, src + f, j->out, p->out_dtype,
                   out_off + (g * p->c_out_g + f) * p->out_fs);
    }
  }
}

// Packs the kernel as [G, kpos, Cin_g, Cout/G] (the GEMM's B operand).
static void pack_kernel(const conv_params_t *p, const void *w, void *dst) {
  size_t ces = iron_dtype_size(p->comp_dtype);
  int64_t k[CONV_MAX_SP];
  int64_t kdim = p->ks_count * p->c_in_g;
  char *out = dst;
  for (int32_t d = 0; d < p->nsp; ++d)
    k[d] = 0;
  int64_t kpos = 0;
  do {
    int64_t k_off = 0;
    for (int32_t d = 0; d < p->nsp; ++d)
      k_off += k[d] * p->k_ss[d];
    for (int64_t g = 0; g < p->groups; ++g)
      for (int64_t c = 0; c < p->c_in_g; ++c)
        for (int64_t f = 0; f < p->c_out_g; ++f) {
          int64_t src = (g * p->c_out_g + f) * p->k_os + c * p->k_is + k_off;
          int64_t di = (g * kdim + kpos * p->c_in_g + c) * p->c_out_g + f;
          memcpy(out + (size_t)di * ces, (const char *)w + (size_t)src * ces,
                 ces);
        }
    ++kpos;
  } while (next_window(p, k));
}

static iron_status_t to_compute(iron_threadpool_t *pool, const conv_params_t *p,
                                const void *src, iron_dtype_t sdt,
                                int64_t count, void **buf, const void **out) {
  *out = src;
  if (sdt == p->comp_dtype)
    return IRON_OK;
  *buf = malloc((size_t)count * iron_dtype_size(p->comp_dtype) + 1);
  if (!*buf)
    return IRON_ERR(RESOURCE_EXHAUSTED, "convolution: out of memory");
  convert_job_t job = {src, sdt, p->comp_dtype, *buf};
  iron_threadpool_parallel_for(pool, count, 1 << 14, convert_chunk, &job);
  *out = *buf;
  return IRON_OK;
}

// c[i] += t[i] for `n` compute-dtype elements (integers wrap around).
static void add_into(iron_dtype_t cdt, void *c, const void *t, int64_t n) {
  switch (cdt) {
  case IRON_DTYPE_F32:
  case IRON_DTYPE_C64: {
    int64_t m = cdt == IRON_DTYPE_C64 ? 2 * n : n;
    for (int64_t i = 0; i < m; ++i)
      ((float *)c)[i] += ((const float *)t)[i];
    break;
  }
  case IRON_DTYPE_F64:
  case IRON_DTYPE_C128: {
    int64_t m = cdt == IRON_DTYPE_C128 ? 2 * n : n;
    for (int64_t i = 0; i < m; ++i)
      ((double *)c)[i] += ((const double *)t)[i];
    break;
  }
  default:
    for (int64_t i = 0; i < n; ++i)
      ((uint64_t *)c)[i] += ((const uint64_t *)t)[i];
    break;
  }
}

// im2col + GEMM over chunks of rows and, when one row of patches alone is
// large (weight gradients: the kernel spans the whole image), chunks of
// kernel positions whose partial products are summed.
static iron_status_t run_fast(const iron_kernel_ctx_t *ctx, conv_job_t *j) {
  const conv_params_t *p = j->p;
  size_t ces = iron_dtype_size(p->comp_dtype);
  int64_t kdim = p->ks_count * p->c_in_g;
  int64_t m_total = p->n_out * p->os_count;
  int64_t pos_bytes = p->groups * p->c_in_g * (int64_t)ces; // per row
  int64_t min_rows = m_total < 256 ? m_total : 256;
  int64_t chunk, kpc; // rows and kernel positions per chunk
  if (pos_bytes * p->ks_count * min_rows <= p->patch_bytes) {
    kpc = p->ks_count;
    chunk = p->patch_bytes / (pos_bytes * p->ks_count);
    if (chunk > m_total)
      chunk = m_total;
  } else {
    chunk = min_rows;
    kpc = p->patch_bytes / (pos_bytes * chunk);
    if (kpc < 1)
      kpc = 1;
  }
  bool ksplit = kpc < p->ks_count;
  bool direct =
      p->groups == 1 && p->out_dtype == p->comp_dtype && p->out_rows_contiguous;
  size_t cbytes = (size_t)(chunk * p->c_out) * ces + 1;
  void *wpack = malloc((size_t)p->rhs_count * ces + 1);
  void *patches = malloc((size_t)(chunk * kpc * pos_bytes) + 1);
  void *cbuf = direct ? NULL : malloc(cbytes);
  void *tbuf = ksplit ? malloc(cbytes) : NULL;
  iron_status_t st = IRON_OK;
  if (!wpack || !patches || (!direct && !cbuf) || (ksplit && !tbuf)) {
    st = IRON_ERR(RESOURCE_EXHAUSTED, "convolution: out of memory");
    goto done;
  }
  pack_kernel(p, j->rhs, wpack);
  j->patches = patches;
  for (int64_t r0 = 0; r0 < m_total && !st; r0 += chunk) {
    int64_t rows = m_total - r0 < chunk ? m_total - r0 : chunk;
    j->row0 = r0;
    j->rows = rows;
    void *c = direct ? (char *)j->out + (size_t)(r0 * p->c_out) * ces : cbuf;
    for (int64_t kp0 = 0; kp0 < p->ks_count && !st; kp0 += kpc) {
      int64_t kpn = p->ks_count - kp0 < kpc ? p->ks_count - kp0 : kpc;
      int64_t kd = kpn * p->c_in_g;
      j->kp0 = kp0;
      j->kpn = kpn;
      int64_t grain = 4096 / (kd * p->groups + 1) + 1;
      iron_threadpool_parallel_for(ctx->pool, rows, grain, fill_rows, j);
      iron_host_gemm_view_t a = {patches, rows * kd, kd, 1};
      iron_host_gemm_view_t bv = {
          (const char *)wpack + (size_t)(kp0 * p->c_in_g * p->c_out_g) * ces,
          kdim * p->c_out_g, p->c_out_g, 1};
      void *dst = kp0 == 0 ? c : tbuf;
      st = iron_host_gemm(ctx->pool, p->gemm_type, true, p->groups, rows,
                          p->c_out_g, kd, &a, &bv, dst);
      if (!st && kp0 > 0)
        add_into(p->comp_dtype, c, tbuf, rows * p->c_out);
    }
    if (!st && !direct) {
      j->c = cbuf;
      iron_threadpool_parallel_for(ctx->pool, rows, 4096 / (p->c_out + 1) + 1,
                                   scatter_rows, j);
    }
  }
done:
  free(wpack);
  free(patches);
  free(cbuf);
  free(tbuf);
  return st;
}

static iron_status_t conv_run(const iron_kernel_ctx_t *ctx, const void *params,
                              const iron_tensor_t *const *inputs,
                              iron_tensor_t *const *outputs) {
  const conv_params_t *p = params;
  if (p->out_count == 0)
    return IRON_OK;
  void *lbuf = NULL, *rbuf = NULL, *acc = NULL;
  conv_job_t j;
  memset(&j, 0, sizeof(j));
  j.p = p;
  j.out = outputs[0]->data;
  iron_status_t st = to_compute(ctx->pool, p, inputs[0]->data, p->lhs_dtype,
                                p->lhs_count, &lbuf, &j.lhs);
  if (!st)
    st = to_compute(ctx->pool, p, inputs[1]->data, p->rhs_dtype, p->rhs_count,
                    &rbuf, &j.rhs);
  // Groups with very few output features (depthwise convolutions and their
  // gradients) make GEMMs of width 1-3; the direct loops are faster there
  // (measured: 8x32x32x64 depthwise 3x3, 2 cores: 112 ms direct, 427 ms
  // through the GEMM).
  if (!st && p->fast && p->ks_count * p->c_in_g > 0 && p->c_out_g >= 4) {
    st = run_fast(ctx, &j);
  } else if (!st) {
    // Reference loops (also the empty-window case: all zeros).
    int64_t rows = p->n_out * p->os_count;
    size_t ces = iron_dtype_size(p->comp_dtype);
    acc = malloc((size_t)(rows * p->c_out) * ces + 1);
    if (!acc) {
      st = IRON_ERR(RESOURCE_EXHAUSTED, "convolution: out of memory");
    } else {
      j.c = acc;
      int64_t work = p->c_out * p->ks_count * p->c_in_g + 1;
      iron_threadpool_parallel_for(ctx->pool, rows, 65536 / work + 1, ref_rows,
                                   &j);
    }
  }
  free(lbuf);
  free(rbuf);
  free(acc);
  return st;
}

static const iron_kernel_t kConv = {.name = "convolution",
                                         .prepare = conv_prepare,
                                         .run = conv_run,
                                         .destroy = conv_destroy};

void iron_host_register_conv(iron_kernel_table_t table) {
  table[IRON_OP_CONVOLUTION] = &kConv;
}
