// dot_general's generated kernels: operand packing (strided views to dense
// arrays, dtype conversions) and the integer matmul.
#include "device/cuda/gen/ops.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Appends `dst_comp_var = convert(src_comp_expr)` where the source is of
// dtype s and the destination of d, both as comp types.
static iron_status_t emit_convert(iron_cuda_text_t *t, iron_dtype_t s,
                                  iron_dtype_t d, const char *dst,
                                  const char *src) {
  iron_cuda_type_t ts = iron_cuda_type_plain(s), td = iron_cuda_type_plain(d);
  if (ts.is_complex && !td.is_complex)
    return IRON_ERR(UNIMPLEMENTED, "complex to real conversion");
  if (td.is_complex && ts.is_complex) {
    iron_cuda_text_printf(t, "%s.re = %s.re; %s.im = %s.im;\n", dst, src, dst,
                          src);
  } else if (td.is_complex) {
    iron_cuda_text_printf(t, "%s.re = (%s)(%s); %s.im = 0;\n", dst,
                          d == IRON_DTYPE_C64 ? "float" : "double", src, dst);
  } else if (d == IRON_DTYPE_PRED) {
    iron_cuda_text_printf(t, "%s = (%s) != 0;\n", dst, src);
  } else {
    iron_cuda_text_printf(t, "%s = (%s)(%s);\n", dst, td.comp, src);
  }
  return IRON_OK;
}

static void emit_index_decompose(iron_cuda_text_t *t, const char *lin,
                                 int32_t rank, const int64_t *dims,
                                 const int64_t *strides, const char *off) {
  iron_cuda_text_printf(t, "int64_t r_ = %s, %s = 0;\n", lin, off);
  for (int32_t d = rank - 1; d >= 0; --d) {
    if (dims[d] == 1) continue;
    iron_cuda_text_printf(t, "{ int64_t q_ = r_ / %lldLL; ", (long long)dims[d]);
    iron_cuda_text_printf(t, "%s += (r_ - q_ * %lldLL) * %lldLL; r_ = q_; }\n",
                          off, (long long)dims[d], (long long)strides[d]);
  }
}

// Narrow dtypes in pack kernels (dot operands and results; f8E8M0FNU by
// its f32 bits, as the host's iron_ew_narrow_dot_load/store): s4/u4 read as
// s8/u8 (sign-extended low bits) and written as their low bits; f8/f4
// read as f32 (exact) and written from f32 as XLA:CPU stores a dot's f32
// result: rounded to f16, then to the narrow dtype (f16 NaN -> f8E5M2 is
// 0x7f). `wide` is the dtype the value is converted from/to.
typedef struct pack_narrow {
  bool on;
  iron_dtype_t wide;
  int eb, mb, bias, kind;  // narrow floats
} pack_narrow_t;

static pack_narrow_t pack_narrow(iron_dtype_t dt) {
  pack_narrow_t n = {false, IRON_DTYPE_INVALID, 0, 0, 0, 0};
  if (dt == IRON_DTYPE_F8E8M0FNU) {  // f32 bits (see below)
    n.on = true;
    n.wide = IRON_DTYPE_F32;
    n.kind = -1;
  } else if (dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_U4 ||
             dt == IRON_DTYPE_S2 || dt == IRON_DTYPE_U2) {
    n.on = true;
    n.wide = dt == IRON_DTYPE_S4 || dt == IRON_DTYPE_S2 ? IRON_DTYPE_S8
                                                        : IRON_DTYPE_U8;
  } else if (iron_cuda_nf_format(dt, &n.eb, &n.mb, &n.bias, &n.kind)) {
    n.on = true;
    n.wide = IRON_DTYPE_F32;
  }
  return n;
}

iron_status_t iron_cuda_gen_pack(const char *name, iron_dtype_t src_dt,
                                 iron_dtype_t dst_dt, int32_t rank,
                                 const int64_t *dims,
                                 const int64_t *src_strides, char **out_src) {
  pack_narrow_t ns = pack_narrow(src_dt), nd = pack_narrow(dst_dt);
  iron_cuda_type_t ts = iron_cuda_type_plain(ns.on ? ns.wide : src_dt);
  iron_cuda_type_t td = iron_cuda_type_plain(nd.on ? nd.wide : dst_dt);
  if (ns.on) ts.store = "uint8_t";
  if (nd.on) td.store = "uint8_t";
  if (!ts.store || !td.store)
    return IRON_ERR(UNIMPLEMENTED, "pack %s -> %s", iron_dtype_name(src_dt),
                    iron_dtype_name(dst_dt));
  int64_t count = 1;
  for (int32_t d = 0; d < rank; ++d) count *= dims[d];
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  bool flush = iron_cuda_flush_denormals();
  iron_cuda_text_printf(&t,
                        "extern \"C\" __global__ void %s(const %s *__restrict__ "
                        "src, %s *__restrict__ dst) {\n",
                        name, ts.store, td.store);
  iron_cuda_text_printf(
      &t,
      "for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < "
      "%lldLL; i += (int64_t)gridDim.x * blockDim.x) {\n",
      (long long)count);
  emit_index_decompose(&t, "i", rank, dims, src_strides, "o_");
  if (src_dt == IRON_DTYPE_S4)
    iron_cuda_text_printf(&t, "int8_t v_ = (int8_t)(((int)(src[o_] & 0xf) ^ 8) - 8);\n");
  else if (src_dt == IRON_DTYPE_U4)
    iron_cuda_text_printf(&t, "uint8_t v_ = (uint8_t)(src[o_] & 0xf);\n");
  else if (src_dt == IRON_DTYPE_S2)
    iron_cuda_text_printf(&t, "int8_t v_ = (int8_t)(((int)(src[o_] & 0x3) ^ 2) - 2);\n");
  else if (src_dt == IRON_DTYPE_U2)
    iron_cuda_text_printf(&t, "uint8_t v_ = (uint8_t)(src[o_] & 0x3);\n");
  else if (ns.kind < 0)  // f8E8M0FNU: 2^-127 (0x00) is an f32 denormal
    iron_cuda_text_printf(&t, "float v_ = %siron_e8m0_ld(src[o_]);\n",
                          flush ? "src[o_] == 0 ? 0.0f : " : "");
  else if (ns.on)
    iron_cuda_text_printf(&t, "float v_ = (float)iron_nf_decode(src[o_], %d, %d, %d, %d);\n",
                          ns.eb, ns.mb, ns.bias, ns.kind);
  else
    iron_cuda_text_printf(&t, "%s v_ = %s(src[o_]);\n", ts.comp, ts.ld);
  iron_cuda_text_printf(&t, "%s w_;\n", td.comp);
  iron_status_t st = emit_convert(&t, ns.on ? ns.wide : src_dt,
                                  nd.on ? nd.wide : dst_dt, "w_", "v_");
  if (st) {
    iron_cuda_text_free(&t);
    return st;
  }
  if (dst_dt == IRON_DTYPE_S4 || dst_dt == IRON_DTYPE_U4)
    iron_cuda_text_printf(&t, "dst[i] = (uint8_t)(w_ & 0xf);\n}\n}\n");
  else if (nd.kind < 0)  // from the f32 bits, a denormal flushed first
    iron_cuda_text_printf(&t, "dst[i] = iron_e8m0_st(%s(w_));\n}\n}\n",
                          flush ? "iron_daz" : "");
  else if (nd.on)
    iron_cuda_text_printf(
        &t,
        "dst[i] = %s"
        "iron_nf_encode((double)iron_ld_f16(iron_st_f16(w_)), %d, %d, %d, %d);\n"
        "}\n}\n",
        dst_dt == IRON_DTYPE_F8E5M2 ? "w_ != w_ ? (uint8_t)0x7f : " : "",
        nd.eb, nd.mb, nd.bias, nd.kind);
  else
    iron_cuda_text_printf(&t, "dst[i] = %s(w_);\n}\n}\n", td.st);
  return iron_cuda_text_finish(&t, out_src);
}

iron_status_t iron_cuda_gen_dot_int(const char *name, iron_dtype_t lhs_dt,
                                    iron_dtype_t rhs_dt, iron_dtype_t out_dt,
                                    int64_t batch, int64_t m, int64_t n,
                                    int64_t k, const int64_t ls[3],
                                    const int64_t rs[3], char **out_src) {
  iron_cuda_type_t tl = iron_cuda_type_plain(lhs_dt);
  iron_cuda_type_t tr = iron_cuda_type_plain(rhs_dt);
  // s4/u4 results: the low 4 bits (wrap around, as the host).
  bool n4 = out_dt == IRON_DTYPE_S4 || out_dt == IRON_DTYPE_U4;
  iron_cuda_type_t to = iron_cuda_type_plain(n4 ? IRON_DTYPE_U8 : out_dt);
  if (!tl.store || !tr.store || !to.store || tl.is_float || tr.is_float ||
      to.is_float || tl.is_complex || tr.is_complex || to.is_complex)
    return IRON_ERR(UNIMPLEMENTED, "integer dot %s x %s -> %s",
                    iron_dtype_name(lhs_dt), iron_dtype_name(rhs_dt),
                    iron_dtype_name(out_dt));
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_prelude());
  // Unsigned 64-bit products and sums: wrap-around without UB, the low bits
  // equal the host's int64 arithmetic.
  iron_cuda_text_printf(
      &t,
      "extern \"C\" __global__ void __launch_bounds__(256) %s(const %s "
      "*__restrict__ lhs, const %s *__restrict__ rhs, %s *__restrict__ out) "
      "{\n"
      "__shared__ uint64_t a_[16][17], b_[16][17];\n"
      "const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;\n"
      // Tiles in grid-stride loops (bounds uniform per block, so every
      // thread reaches the same barriers): any grid covers any size.
      "for (int64_t bi = blockIdx.z; bi < %lldLL; bi += gridDim.z)\n"
      "for (int64_t ry = blockIdx.y; ry * 16 < %lldLL; ry += gridDim.y)\n"
      "for (int64_t cx = blockIdx.x; cx * 16 < %lldLL; cx += gridDim.x) {\n"
      "const int64_t row = ry * 16 + ty;\n"
      "const int64_t col = cx * 16 + tx;\n"
      "uint64_t acc = 0;\n"
      "for (int64_t k0 = 0; k0 < %lldLL; k0 += 16) {\n"
      "  int64_t ka = k0 + tx, kb = k0 + ty;\n"
      "  a_[ty][tx] = (row < %lldLL && ka < %lldLL) ? (uint64_t)(int64_t)lhs[bi "
      "* %lldLL + row * %lldLL + ka * %lldLL] : 0;\n"
      "  b_[ty][tx] = (kb < %lldLL && col < %lldLL) ? (uint64_t)(int64_t)rhs[bi "
      "* %lldLL + kb * %lldLL + col * %lldLL] : 0;\n"
      "  __syncthreads();\n"
      "  for (int j = 0; j < 16; ++j) acc += a_[ty][j] * b_[j][tx];\n"
      "  __syncthreads();\n"
      "}\n"
      "if (row < %lldLL && col < %lldLL) {\n"
      "  int64_t o = (bi * %lldLL + row) * %lldLL + col;\n",
      name, tl.store, tr.store, to.store, (long long)batch, (long long)m,
      (long long)n, (long long)k, (long long)m,
      (long long)k, (long long)ls[0], (long long)ls[1], (long long)ls[2],
      (long long)k, (long long)n, (long long)rs[0], (long long)rs[1],
      (long long)rs[2], (long long)m, (long long)n, (long long)m,
      (long long)n);
  if (out_dt == IRON_DTYPE_PRED)
    iron_cuda_text_printf(&t, "  out[o] = acc != 0;\n}\n}\n}\n");
  else if (n4)
    iron_cuda_text_printf(&t, "  out[o] = (uint8_t)(acc & 0xfu);\n}\n}\n}\n");
  else
    iron_cuda_text_printf(&t, "  out[o] = (%s)acc;\n}\n}\n}\n", to.store);
  return iron_cuda_text_finish(&t, out_src);
}

void iron_cuda_dot_int_grid(int64_t batch, int64_t m, int64_t n,
                            const unsigned limit[3], unsigned out_grid[3]) {
  int64_t want[3] = {(n + 15) / 16, (m + 15) / 16, batch};
  for (int i = 0; i < 3; ++i) {
    int64_t g = want[i] < 1 ? 1 : want[i];
    out_grid[i] = (unsigned)(g > (int64_t)limit[i] ? (int64_t)limit[i] : g);
  }
}
