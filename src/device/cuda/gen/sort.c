// Pieces of the CUDA sort kernels (cuda_sort_program.h): the record type
// and comparator every sort kernel calls, the recognized keys as
// order-preserving unsigned integers, and the bitonic network that sorts a
// row (one-block path) or a tile of a row (the merge sort's first stage) in
// shared memory. Generated code is CUDA C text built here from the op's
// dtypes, its comparator region or recognized keys (src/device/plans/sort_keys.h).
#include <stdio.h>
#include <string.h>

#include "device/cuda/gen/ops.h"
#include "device/cuda/cuda_sort_program.h"

// --- keys ---------------------------------------------------------------

const char *iron_cuda_sort_key_type(const iron_sort_key_t *k) {
  switch (k->part_size) {
    case 1: return "uint8_t";
    case 2: return "uint16_t";
    case 4: return "uint32_t";
    default: return "uint64_t";
  }
}

typedef struct float_bits {
  uint64_t sign, exp, man;
} float_bits_t;

static float_bits_t float_bits_of(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_F16: return (float_bits_t){0x8000u, 0x7c00u, 0x3ffu};
    case IRON_DTYPE_BF16: return (float_bits_t){0x8000u, 0x7f80u, 0x7fu};
    case IRON_DTYPE_F32:
      return (float_bits_t){0x80000000u, 0x7f800000u, 0x7fffffu};
    default:
      return (float_bits_t){0x8000000000000000ull, 0x7ff0000000000000ull,
                            0xfffffffffffffull};
  }
}

// The key's scalar bits (as its unsigned type) from an operand value `v`
// of the operand's storage type.
static void key_bits_expr(char *buf, size_t cap, const iron_sort_key_t *k,
                          const char *v) {
  const char *f = k->part == 1 ? ".re" : k->part == 2 ? ".im" : "";
  const char *ut = iron_cuda_sort_key_type(k);
  switch (k->dtype) {
    case IRON_DTYPE_F32:
      snprintf(buf, cap, "__float_as_uint(%s%s)", v, f);
      break;
    case IRON_DTYPE_F64:
      snprintf(buf, cap, "(uint64_t)__double_as_longlong(%s%s)", v, f);
      break;
    default:  // f16/bf16 are stored as their bits; integers and pred
      snprintf(buf, cap, "(%s)(%s%s)", ut, v, f);
      break;
  }
}

// `b = canonicalised(b)`: jax's select chain, outermost step first, with
// the host's semantics (sort.c make_key): x == 0 holds for +-0 and, under
// DAZ, for the compute type's denormals (f32, bf16, f64; f16 computes in
// f32 where its denormals are normal).
static void emit_canon(iron_cuda_text_t *t, const iron_sort_key_t *k,
                       bool daz) {
  if (k->num_canon == 0) return;
  float_bits_t fb = float_bits_of(k->dtype);
  const char *ut = iron_cuda_sort_key_type(k);
  for (int32_t i = 0; i < k->num_canon; ++i) {
    const iron_sort_canon_step_t *st = &k->canon[i];
    char test[256];
    if (st->is_nan_test) {
      snprintf(test, sizeof(test),
               "(b & 0x%llxULL) == 0x%llxULL && (b & 0x%llxULL) != 0",
               (unsigned long long)fb.exp, (unsigned long long)fb.exp,
               (unsigned long long)fb.man);
    } else if (st->eq_value != st->eq_value) {
      snprintf(test, sizeof(test), "false");  // x == NaN never holds
    } else if (st->eq_value == 0) {
      if (daz && k->dtype != IRON_DTYPE_F16)
        snprintf(test, sizeof(test), "(b & 0x%llxULL) == 0",
                 (unsigned long long)fb.exp);
      else
        snprintf(test, sizeof(test), "(b & 0x%llxULL) == 0",
                 (unsigned long long)(fb.exp | fb.man));
    } else {
      // Compared as doubles, as the host does (exact conversions).
      uint64_t bits;
      double d = st->eq_value;
      memcpy(&bits, &d, 8);
      snprintf(test, sizeof(test),
               "iron_sort_f2d_%s(b) == __longlong_as_double(0x%llxLL)",
               iron_dtype_name(k->dtype), (unsigned long long)bits);
    }
    iron_cuda_text_printf(t, "%sif (%s) b = (%s)0x%llxULL;\n", i ? "else " : "",
                          test, ut, (unsigned long long)st->repl_bits);
  }
}

// Bit-exact float -> double conversions from the bits (no f32 arithmetic,
// which -ftz would flush).
static const char kF2D[] =
    "__device__ __forceinline__ double iron_sort_f2d_f32(uint32_t b) {\n"
    "  uint64_t s = (uint64_t)(b >> 31) << 63;\n"
    "  uint32_t e = (b >> 23) & 255u, m = b & 0x7fffffu;\n"
    "  if (e == 255u) return __longlong_as_double((int64_t)(s | "
    "0x7ff0000000000000ULL | ((uint64_t)m << 29)));\n"
    "  if (e == 0u) {\n"
    "    double d = (double)m * 1.4012984643248171e-45;\n"
    "    return s ? -d : d;\n"
    "  }\n"
    "  return __longlong_as_double((int64_t)(s | ((uint64_t)(e + 896u) << 52) "
    "| ((uint64_t)m << 29)));\n"
    "}\n"
    "__device__ __forceinline__ double iron_sort_f2d_bf16(uint16_t b) {\n"
    "  return iron_sort_f2d_f32((uint32_t)b << 16);\n"
    "}\n"
    "__device__ __forceinline__ double iron_sort_f2d_f16(uint16_t b) {\n"
    "  return iron_sort_f2d_f32(__float_as_uint(iron_ld_f16(b)));\n"
    "}\n"
    "__device__ __forceinline__ double iron_sort_f2d_f64(uint64_t b) {\n"
    "  return __longlong_as_double((int64_t)b);\n"
    "}\n";

void iron_cuda_sort_gen_key_fns(iron_cuda_text_t *t, const char *p,
                                const iron_cuda_sort_shape_t *s) {
  if (!s->keys) return;
  iron_cuda_text_printf(t, "%s", kF2D);
  char bits[160];
  for (int32_t k = 0; k < s->keys->num_keys; ++k) {
    const iron_sort_key_t *key = &s->keys->keys[k];
    const char *ut = iron_cuda_sort_key_type(key);
    const char *st = s->ty[key->operand].store;
    key_bits_expr(bits, sizeof(bits), key, "v");
    if (key->mode == IRON_SORT_KEY_F64) {
      // FLOAT compares: the canonicalised value as a double.
      iron_cuda_text_printf(t,
                            "__device__ __forceinline__ double %s_dkey%d("
                            "const %s &v) {\n%s b = %s;\n",
                            p, k, st, ut, bits);
      emit_canon(t, key, s->daz);
      iron_cuda_text_printf(t, "return iron_sort_f2d_%s(b);\n}\n",
                            iron_dtype_name(key->dtype));
      continue;
    }
    iron_cuda_text_printf(
        t, "__device__ __forceinline__ %s %s_key%d(const %s &v) {\n%s b = %s;\n",
        ut, p, k, st, ut, bits);
    emit_canon(t, key, s->daz);
    unsigned long long sign = 1ull << (key->nbits - 1);
    if (key->mode == IRON_SORT_KEY_S64 && key->is_float) {
      // Total order: negatives reversed below the positives.
      iron_cuda_text_printf(t, "b = (b & (%s)0x%llxULL) ? (%s)~b : (%s)(b | "
                            "(%s)0x%llxULL);\n",
                            ut, sign, ut, ut, ut, sign);
    } else if (key->mode == IRON_SORT_KEY_S64) {
      iron_cuda_text_printf(t, "b = (%s)(b ^ (%s)0x%llxULL);\n", ut, ut, sign);
    }
    if (key->descending) iron_cuda_text_printf(t, "b = (%s)~b;\n", ut);
    iron_cuda_text_printf(t, "return b;\n}\n");
  }
}

// --- records and the comparator ------------------------------------------

void iron_cuda_sort_gen_params(iron_cuda_text_t *t,
                               const iron_cuda_sort_shape_t *s,
                               const char *fmt) {
  for (uint32_t i = 0; i < s->num; ++i) {
    if (i) iron_cuda_text_printf(t, ", ");
    iron_cuda_text_printf(t, fmt, s->ty[i].store, i);
  }
}

iron_status_t iron_cuda_sort_gen_compare(iron_cuda_text_t *t, const char *p,
                                         const iron_cuda_sort_shape_t *s) {
  char fname[96];
  if (!s->keys) {
    snprintf(fname, sizeof(fname), "%s_cmp", p);
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_cuda_gen_region_fn(t, fname, s->comparator));
  } else {
    iron_cuda_sort_gen_key_fns(t, p, s);
  }
  iron_cuda_text_printf(t, "struct %s_rec {", p);
  for (uint32_t i = 0; i < s->num; ++i)
    iron_cuda_text_printf(t, " %s v%u;", s->ty[i].store, i);
  iron_cuda_text_printf(t,
                        " };\n__device__ __forceinline__ bool %s_lt(const "
                        "%s_rec &a, const %s_rec &b) {\n",
                        p, p, p);
  if (!s->keys) {
    iron_cuda_text_printf(t, "uint8_t r;\n%s(", fname);
    for (uint32_t i = 0; i < s->num; ++i)
      iron_cuda_text_printf(t, "%s(a.v%u), %s(b.v%u), ", s->ty[i].ld, i,
                            s->ty[i].ld, i);
    iron_cuda_text_printf(t, "&r);\nreturn r != 0;\n}\n");
    return IRON_OK;
  }
  // The host's fast_less (sort.c): keys in order, the first that differs
  // decides.
  for (int32_t k = 0; k < s->keys->num_keys; ++k) {
    const iron_sort_key_t *key = &s->keys->keys[k];
    int32_t o = key->operand;
    if (key->mode == IRON_SORT_KEY_F64) {
      const char *x = key->descending ? "b" : "a";
      const char *y = key->descending ? "a" : "b";
      iron_cuda_text_printf(t,
                            "{ double x = %s_dkey%d(%s.v%d), y = %s_dkey%d("
                            "%s.v%d);\nif (x < y) return true;\n"
                            "if (!(x == y)) return false; }\n",
                            p, k, x, o, p, k, y, o);
    } else {
      iron_cuda_text_printf(t,
                            "{ %s x = %s_key%d(a.v%d), y = %s_key%d(b.v%d);\n"
                            "if (x < y) return true;\n"
                            "if (x != y) return false; }\n",
                            iron_cuda_sort_key_type(key), p, k, o, p, k, o);
    }
  }
  iron_cuda_text_printf(t, "return false;\n}\n");
  return IRON_OK;
}

// --- bitonic network ------------------------------------------------------

iron_status_t iron_cuda_sort_gen_bitonic(iron_cuda_text_t *t, const char *kname,
                                         const char *p,
                                         const iron_cuda_sort_shape_t *s,
                                         int64_t tile, unsigned block) {
  // less(a, b) over tile positions; positions >= cnt are +infinity, ties
  // go by position: the network's order is the stable order.
  iron_cuda_text_printf(t, "__device__ __forceinline__ bool %s_at(", kname);
  iron_cuda_sort_gen_params(t, s, "const %s *__restrict__ in%u");
  iron_cuda_text_printf(t,
                        ", int64_t sb, int64_t inner, int cnt, int a, int b) "
                        "{\n"
                        "if (a >= cnt) return false;\nif (b >= cnt) return "
                        "true;\n%s_rec x, y;\n",
                        p);
  for (uint32_t i = 0; i < s->num; ++i)
    iron_cuda_text_printf(t,
                          "x.v%u = in%u[sb + (int64_t)a * inner]; y.v%u = "
                          "in%u[sb + (int64_t)b * inner];\n",
                          i, i, i, i);
  iron_cuda_text_printf(t,
                        "if (%s_lt(x, y)) return true;\nif (%s_lt(y, x)) "
                        "return false;\nreturn a < b;\n}\n",
                        p, p);
  char args[64 * 12];
  int at = 0;
  for (uint32_t i = 0; i < s->num && at < (int)sizeof(args) - 12; ++i)
    at += snprintf(args + at, sizeof(args) - (size_t)at, "in%u, ", i);
  iron_cuda_text_printf(t,
                        "extern \"C\" __global__ void __launch_bounds__(%u) "
                        "%s(",
                        block, kname);
  iron_cuda_sort_gen_params(t, s, "const %s *__restrict__ in%u");
  iron_cuda_text_printf(t, ", ");
  iron_cuda_sort_gen_params(t, s, "%s *__restrict__ out%u");
  // 16-bit positions past 8192 keep the permutation within 32 KiB of
  // static shared memory.
  iron_cuda_text_printf(
      t,
      ", int64_t dinner, int64_t n, int64_t rows, int64_t inner) {\n"
      "__shared__ %s idx[%lld];\n"
      "const int64_t tpr = (n + %lld) / %lld;\n"
      "for (int64_t b = blockIdx.x; b < rows * tpr; b += gridDim.x) {\n"
      "const int64_t row = b / tpr, t0 = (b - row * tpr) * %lld;\n"
      "const int cnt = (int)(n - t0 < %lld ? n - t0 : %lld);\n"
      "const int64_t sb = (row / inner) * (n * inner) + row %% inner + t0 * "
      "inner;\n"
      "for (int i = threadIdx.x; i < %lld; i += blockDim.x) idx[i] = i;\n"
      "__syncthreads();\n"
      "for (int k = 2; k <= %lld; k <<= 1) {\n"
      "for (int j = k >> 1; j > 0; j >>= 1) {\n"
      "for (int i = threadIdx.x; i < %lld; i += blockDim.x) {\n"
      "int q = i ^ j;\n"
      "if (q > i) {\n"
      "int a = idx[i], c = idx[q];\n"
      "bool sw = (i & k) == 0 ? %s_at(%ssb, inner, cnt, c, a) : %s_at(%ssb, "
      "inner, cnt, a, c);\n"
      "if (sw) { idx[i] = c; idx[q] = a; }\n"
      "}\n}\n__syncthreads();\n}\n}\n"
      "const int64_t db = (row / dinner) * (n * dinner) + row %% dinner + t0 "
      "* dinner;\n"
      "for (int i = threadIdx.x; i < cnt; i += blockDim.x) {\n"
      "const int64_t src = sb + (int64_t)idx[i] * inner, dst = db + "
      "(int64_t)i * dinner;\n",
      tile > 8192 ? "uint16_t" : "int", (long long)tile, (long long)(tile - 1),
      (long long)tile, (long long)tile, (long long)tile, (long long)tile,
      (long long)tile, (long long)tile, (long long)tile, kname, args, kname,
      args);
  for (uint32_t i = 0; i < s->num; ++i)
    iron_cuda_text_printf(t, "out%u[dst] = in%u[src];\n", i, i);
  iron_cuda_text_printf(t, "}\n__syncthreads();\n}\n}\n");
  return IRON_OK;
}

unsigned iron_cuda_sort_block_threads(int64_t n) {
  int64_t npad = 1;
  while (npad < n) npad <<= 1;
  return npad / 2 >= 512 ? 512 : (unsigned)(npad / 2 < 32 ? 32 : npad / 2);
}

iron_status_t iron_cuda_sort_gen_block(iron_cuda_text_t *t, const char *p,
                                       const iron_cuda_sort_shape_t *s,
                                       unsigned *out_block) {
  if (s->n > IRON_CUDA_SORT_MAX_ROW)
    return IRON_ERR(UNIMPLEMENTED,
                    "one-block cuda sort of rows longer than %d (%lld)",
                    IRON_CUDA_SORT_MAX_ROW, (long long)s->n);
  int64_t npad = 1;
  while (npad < s->n) npad <<= 1;
  unsigned block = iron_cuda_sort_block_threads(s->n);
  char kname[128];
  snprintf(kname, sizeof(kname), "%s_block", p);
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_cuda_sort_gen_bitonic(t, kname, p, s, npad, block));
  *out_block = block;
  return IRON_OK;
}

// --- the one-block kernel as a standalone source ----------------------------

iron_status_t iron_cuda_gen_sort(const char *name, int32_t rank,
                                 const int64_t *dims, int32_t dimension,
                                 uint32_t num, const iron_dtype_t *dtypes,
                                 const iron_region_t *comparator,
                                 char **out_src, unsigned *out_grid,
                                 unsigned *out_block) {
  if (num == 0 || num > IRON_CUDA_SORT_MAX_OPERANDS)
    return IRON_ERR(UNIMPLEMENTED, "cuda sort of %u operands", num);
  if (dimension < 0 || dimension >= rank)
    return IRON_ERR(INVALID_ARGUMENT, "sort dimension %d out of range",
                    dimension);
  iron_cuda_sort_shape_t s;
  memset(&s, 0, sizeof(s));
  s.num = num;
  int64_t outer = 1;
  s.n = dims[dimension];
  s.inner = 1;
  for (int32_t d = 0; d < dimension; ++d) outer *= dims[d];
  for (int32_t d = dimension + 1; d < rank; ++d) s.inner *= dims[d];
  s.rows = outer * s.inner;
  s.comparator = comparator;
  for (uint32_t i = 0; i < num; ++i) {
    s.dtypes[i] = dtypes[i];
    s.ty[i] = iron_cuda_type(dtypes[i]);
    if (!s.ty[i].store)
      return IRON_ERR(UNIMPLEMENTED, "cuda sort for dtype %s",
                      iron_dtype_name(dtypes[i]));
  }
  if (s.n > IRON_CUDA_SORT_MAX_ROW)
    return IRON_ERR(UNIMPLEMENTED, "cuda sort of rows longer than %d (%lld)",
                    IRON_CUDA_SORT_MAX_ROW, (long long)s.n);
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  unsigned block = 0;
  iron_status_t st = iron_cuda_sort_gen_compare(&t, name, &s);
  if (!st) {
    int64_t npad = 1;
    while (npad < s.n) npad <<= 1;
    block = iron_cuda_sort_block_threads(s.n);
    st = iron_cuda_sort_gen_bitonic(&t, name, name, &s, npad, block);
  }
  if (st) {
    iron_cuda_text_free(&t);
    return st;
  }
  int64_t g = s.rows < 1 ? 1 : s.rows > (1 << 20) ? (1 << 20) : s.rows;
  *out_grid = (unsigned)g;
  *out_block = block;
  return iron_cuda_text_finish(&t, out_src);
}
