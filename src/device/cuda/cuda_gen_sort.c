// stablehlo.sort as generated CUDA C: per row, a bitonic sorting network
// over an index permutation in shared memory; the comparator is translated
// from the region IR and ties are broken by index, which makes the network
// produce exactly the stable order.
#include <stdio.h>

#include "device/cuda/cuda_ops_gen.h"

iron_status_t iron_cuda_gen_sort(const char *name, int32_t rank,
                                 const int64_t *dims, int32_t dimension,
                                 uint32_t num, const iron_dtype_t *dtypes,
                                 const iron_ir_region_t *comparator,
                                 char **out_src, unsigned *out_grid,
                                 unsigned *out_block) {
  if (num == 0 || num > 16)
    return IRON_ERR(UNIMPLEMENTED, "cuda sort of %u operands", num);
  if (dimension < 0 || dimension >= rank)
    return IRON_ERR(INVALID_ARGUMENT, "sort dimension %d out of range",
                    dimension);
  int64_t n = dims[dimension], outer = 1, inner = 1;
  for (int32_t d = 0; d < dimension; ++d) outer *= dims[d];
  for (int32_t d = dimension + 1; d < rank; ++d) inner *= dims[d];
  if (n > IRON_CUDA_SORT_MAX_ROW)
    return IRON_ERR(UNIMPLEMENTED, "cuda sort of rows longer than %d (%lld)",
                    IRON_CUDA_SORT_MAX_ROW, (long long)n);
  iron_cuda_gen_type_t ty[16];
  for (uint32_t i = 0; i < num; ++i) {
    ty[i] = iron_cuda_gen_type_narrow(dtypes[i]);
    if (!ty[i].store)
      return IRON_ERR(UNIMPLEMENTED, "cuda sort for dtype %s",
                      iron_dtype_name(dtypes[i]));
  }
  int64_t npad = 1;
  while (npad < n) npad <<= 1;
  int64_t rows = outer * inner;
  unsigned block = npad / 2 >= 512 ? 512 : (unsigned)(npad / 2 < 32 ? 32 : npad / 2);
  iron_cuda_text_t t;
  iron_cuda_text_init(&t);
  iron_cuda_text_printf(&t, "%s", iron_cuda_ops_prelude());
  iron_status_t st = iron_cuda_gen_region_fn(&t, "iop_cmp", comparator);
  if (st) {
    iron_cuda_text_free(&t);
    return st;
  }
  // less(a, b) over row positions; positions >= n are +infinity.
  iron_cuda_text_printf(&t, "__device__ __forceinline__ bool iop_less(");
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "const %s *__restrict__ in%u, ", ty[i].store, i);
  iron_cuda_text_printf(
      &t,
      "iop_s64 base, int a, int b) {\n"
      "if (a >= %lld) return false;\nif (b >= %lld) return true;\n"
      "iop_s64 ia = base + (iop_s64)a * %lldLL, ib = base + (iop_s64)b * "
      "%lldLL;\n",
      (long long)n, (long long)n, (long long)inner, (long long)inner);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "%s x%u = %s(in%u[ia]), y%u = %s(in%u[ib]);\n",
                          ty[i].comp, i, ty[i].ld, i, i, ty[i].ld, i);
  iron_cuda_text_printf(&t, "iop_u8 ab, ba;\niop_cmp(");
  for (uint32_t i = 0; i < num; ++i) iron_cuda_text_printf(&t, "x%u, y%u, ", i, i);
  iron_cuda_text_printf(&t, "&ab);\nif (ab) return true;\niop_cmp(");
  for (uint32_t i = 0; i < num; ++i) iron_cuda_text_printf(&t, "y%u, x%u, ", i, i);
  iron_cuda_text_printf(&t, "&ba);\nif (ba) return false;\nreturn a < b;\n}\n");
  iron_cuda_text_printf(&t,
                        "extern \"C\" __global__ void __launch_bounds__(%u) "
                        "%s(",
                        block, name);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "const %s *__restrict__ in%u, ", ty[i].store, i);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "%s *__restrict__ out%u%s", ty[i].store, i,
                          i + 1 < num ? ", " : ") {\n");
  char ins[512];
  int at = 0;
  for (uint32_t i = 0; i < num && at < (int)sizeof(ins) - 16; ++i)
    at += snprintf(ins + at, sizeof(ins) - (size_t)at, "in%u, ", i);
  iron_cuda_text_printf(
      &t,
      "__shared__ %s idx[%lld];\n"
      "for (iop_s64 row = blockIdx.x; row < %lldLL; row += gridDim.x) {\n"
      "iop_s64 o = row / %lldLL, c = row - o * %lldLL;\n"
      "iop_s64 base = o * %lldLL + c;\n"
      "for (int i = threadIdx.x; i < %lld; i += blockDim.x) idx[i] = i;\n"
      "__syncthreads();\n"
      "for (int k = 2; k <= %lld; k <<= 1) {\n"
      "for (int j = k >> 1; j > 0; j >>= 1) {\n"
      "for (int i = threadIdx.x; i < %lld; i += blockDim.x) {\n"
      "int p = i ^ j;\n"
      "if (p > i) {\n"
      "int a = idx[i], b = idx[p];\n"
      "bool sw = (i & k) == 0 ? iop_less(%sbase, b, a) : iop_less(%sbase, a, "
      "b);\n"
      "if (sw) { idx[i] = b; idx[p] = a; }\n"
      "}\n}\n__syncthreads();\n}\n}\n"
      "for (int i = threadIdx.x; i < %lld; i += blockDim.x) {\n"
      "iop_s64 src = base + (iop_s64)idx[i] * %lldLL, dst = base + "
      "(iop_s64)i * %lldLL;\n",
      // 16-bit positions past 8192 keep the permutation within the 48 KiB
      // of static shared memory.
      npad > 8192 ? "iop_u16" : "int", (long long)npad, (long long)rows,
      (long long)inner, (long long)inner, (long long)(n * inner),
      (long long)npad, (long long)npad,
      (long long)npad, ins, ins, (long long)n, (long long)inner,
      (long long)inner);
  for (uint32_t i = 0; i < num; ++i)
    iron_cuda_text_printf(&t, "out%u[dst] = in%u[src];\n", i, i);
  iron_cuda_text_printf(&t, "}\n__syncthreads();\n}\n}\n");
  int64_t g = rows < 1 ? 1 : rows > (1 << 20) ? (1 << 20) : rows;
  *out_grid = (unsigned)g;
  *out_block = block;
  return iron_cuda_text_finish(&t, out_src);
}
