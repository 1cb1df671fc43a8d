// The CUDA device's complex (and the real arithmetic jaxlib expands complex
// functions into) against the host device on the complex plane's special
// regions, GPU-free.
//
// Programs: tests/data/complex_plane/*.mlirbc, jax.numpy's functions that
// jax's FunctionAccuracyTest checks on the complex plane (arccos ... sinc,
// complex64 and complex128; tests/gen_complex_plane.py). Each runs on the
// host device (the reference: it follows XLA:CPU) and then as the CUDA
// device would run it: the module is inlined and fused with the CUDA
// predicate, every fusion and element-wise op gets the kernel the CUDA
// generator writes for it, and those kernels run on the CPU as host C++
// (tests/c/cuda_emu.h; what the CUDA device would not generate, constants
// and data movement, runs with the host kernels). NVRTC compiles the same
// kernels for sm_90a.
//
// The operand is a 31 x 31 grid over both parts: -inf, the extreme finite
// values, a logarithmic sweep down to the smallest normal, -0/+0 and the
// same positive values (jax's complex_plane_sample axis), and NaN, +-1,
// +-0.5. Results must agree bit for bit (NaN payloads and signs aside),
// except transcendental libm results a few ulps apart (the host's f32
// exp/log are XLA's polynomials, the emulation calls libm).
//
// A second case sweeps every complex element-wise op (unary ones and
// add/subtract/multiply/divide/power/max/min, and compare) on the same
// values, kernel by kernel, against the host kernel.
//
// A third case does the same for the programs of tests/data/emu_programs
// (jax programs dumped on the host: the unrolled scans and eager ops of
// jax's testScanGrad) on random operands, and for any directory named by
// IRON_TEST_EMU_DIR (IRON_TEST_EMU_ULPS: tolerance, default 64 ulps).
//
// Where a GPU is present (iron_cuda_device_count), the programs also run
// on the CUDA device itself and are compared the same way, which shows the
// GPU's libdevice where it departs from the host. IRON_TEST_DUMP=FILE
// writes the generated kernels; IRON_TEST_VERBOSE=1 prints every
// mismatching element.
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "base/half.h"
#include "compiler/fuse.h"
#include "compiler/inline.h"
#include "compiler/tuple_forward.h"
#include "cuda_emu.h"
#include "cuda_test_nvrtc.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_fusion.h"
#include "host_test_ops.h"
#include "iron/iron.h"
#include "stablehlo/reader.h"
#include "test.h"

enum { kAxis = 31, kPoints = kAxis * kAxis };
// Mismatching elements printed per program (IRON_TEST_VERBOSE=1: all).
static int g_print_max = 4;

static iron_cuda_api_t g_api;
static iron_cuda_device_t *g_dev;
static iron_cuda_kernel_table_t g_ew_table;

// --- the grid
// -----------------------------------------------------------------

// jax's complex_plane_sample axis for size 11 (-inf, -max, 9 logarithmic
// steps down to -tiny, 0, the same positive), then NaN, +-1, +-0.5, -0.
static void axis_values(bool f64, double *out) {
  const double maxexp = f64 ? 1024 : 128, minexp = f64 ? -1021 : -125;
  const double ratio = 3.3219280948873626;
  const double logmin = maxexp / ratio, logtiny = minexp / ratio;
  const double fmax = f64 ? 1.7976931348623157e308 : 3.4028234663852886e38;
  const double tiny = f64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
  double half[11];
  for (int i = 0; i < 11; ++i) {
    double v = pow(10.0, logmin + (logtiny - logmin) * i / 10.0);
    half[i] = f64 ? v : (double)(float)v;
  }
  half[0] = fmax;
  half[10] = tiny;
  int k = 0;
  out[k++] = -INFINITY;
  for (int i = 0; i < 11; ++i) out[k++] = -half[i];
  out[k++] = 0.0;
  for (int i = 10; i >= 0; --i) out[k++] = half[i];
  out[k++] = INFINITY;
  out[k++] = NAN;
  out[k++] = 1.0;
  out[k++] = -1.0;
  out[k++] = 0.5;
  out[k++] = -0.5;
  out[k++] = -0.0;
}

static iron_tensor_t *grid_tensor(iron_dtype_t dt) {
  bool f64 = dt == IRON_DTYPE_C128;
  double ax[kAxis];
  axis_values(f64, ax);
  int64_t n = kPoints;
  iron_tensor_t *t = ht_tensor(dt, 1, &n);
  for (int i = 0; i < kAxis; ++i) {
    for (int j = 0; j < kAxis; ++j) {
      int64_t e = (int64_t)i * kAxis + j;
      if (f64) {
        ((double *)t->data)[2 * e] = ax[j];
        ((double *)t->data)[2 * e + 1] = ax[i];
      } else {
        ((float *)t->data)[2 * e] = (float)ax[j];
        ((float *)t->data)[2 * e + 1] = (float)ax[i];
      }
    }
  }
  return t;
}

// --- comparison
// ----------------------------------------------------------------

// Ulps between two finite floats of the same sign (or both zero).
static int64_t ulps32(float a, float b) {
  int32_t x, y;
  memcpy(&x, &a, 4);
  memcpy(&y, &b, 4);
  if ((x < 0) != (y < 0)) return (a == b) ? 0 : INT64_MAX;
  int64_t d = (int64_t)x - (int64_t)y;
  return d < 0 ? -d : d;
}
static int64_t ulps64(double a, double b) {
  int64_t x, y;
  memcpy(&x, &a, 8);
  memcpy(&y, &b, 8);
  if ((x < 0) != (y < 0)) return (a == b) ? 0 : INT64_MAX;
  if ((x > 0 && y > 0 &&
       (x - y > (int64_t)1 << 52 || y - x > (int64_t)1 << 52)))
    return INT64_MAX;
  int64_t d = x - y;
  return d < 0 ? -d : d;
}

// Part i of element e of two tensors of dtype dt (f32/f64/c64/c128/pred):
// 0 equal (bits, or both NaN), else the ulp distance (INT64_MAX: not close).
static int64_t part_diff(iron_dtype_t dt, const void *g, const void *w,
                         int64_t k) {
  if (dt == IRON_DTYPE_F32 || dt == IRON_DTYPE_C64) {
    float a = ((const float *)g)[k], b = ((const float *)w)[k];
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INT64_MAX;
    if (memcmp(&a, &b, 4) == 0) return 0;
    if (isinf(a) || isinf(b)) return INT64_MAX;
    return ulps32(a, b);
  }
  if (dt == IRON_DTYPE_F64 || dt == IRON_DTYPE_C128) {
    double a = ((const double *)g)[k], b = ((const double *)w)[k];
    if (isnan(a) || isnan(b)) return isnan(a) && isnan(b) ? 0 : INT64_MAX;
    if (memcmp(&a, &b, 8) == 0) return 0;
    if (isinf(a) || isinf(b)) return INT64_MAX;
    return ulps64(a, b);
  }
  size_t es = iron_dtype_size(dt);
  return memcmp((const char *)g + k * es, (const char *)w + k * es, es)
             ? INT64_MAX
             : 0;
}

static int64_t num_parts(const iron_tensor_t *t) {
  if (t->dtype == IRON_DTYPE_C64 || t->dtype == IRON_DTYPE_C128)
    return 2 * t->count;
  return t->count;
}

static void print_elem(FILE *f, const iron_tensor_t *t, int64_t e) {
  switch (t->dtype) {
    case IRON_DTYPE_C64:
      fprintf(f, "(%.9g, %.9g)", ((float *)t->data)[2 * e],
              ((float *)t->data)[2 * e + 1]);
      break;
    case IRON_DTYPE_C128:
      fprintf(f, "(%.17g, %.17g)", ((double *)t->data)[2 * e],
              ((double *)t->data)[2 * e + 1]);
      break;
    case IRON_DTYPE_F32:
      fprintf(f, "%.9g", ((float *)t->data)[e]);
      break;
    case IRON_DTYPE_F64:
      fprintf(f, "%.17g", ((double *)t->data)[e]);
      break;
    default:
      fprintf(f, "0x%02x", ((uint8_t *)t->data)[e]);
      break;
  }
}

// Compares got with want (same type): returns the number of elements that
// differ by more than max_ulps in a part (printing the first few with the
// operand x); *out_ulp_elems counts elements within max_ulps but not equal.
static int64_t compare(const char *what, const iron_tensor_t *x,
                       const iron_tensor_t *got, const iron_tensor_t *want,
                       int64_t max_ulps, int64_t *out_ulp_elems) {
  int64_t bad = 0;
  bool cplx = got->dtype == IRON_DTYPE_C64 || got->dtype == IRON_DTYPE_C128;
  for (int64_t p = 0; p < num_parts(got); ++p) {
    int64_t d = part_diff(got->dtype, got->data, want->data, p);
    if (d == 0) continue;
    if (d <= max_ulps) {
      (*out_ulp_elems)++;
      continue;
    }
    int64_t e = cplx ? p / 2 : p;
    if (bad++ < g_print_max) {
      fprintf(stderr, "  %s: x = ", what);
      if (x)
        print_elem(stderr, x, e);
      else
        fprintf(stderr, "[%lld]", (long long)e);
      fprintf(stderr, " -> ");
      print_elem(stderr, got, e);
      fprintf(stderr, ", host ");
      print_elem(stderr, want, e);
      fprintf(stderr, "\n");
    }
  }
  return bad;
}

// --- CUDA kernels of a module, emulated
// ------------------------------------------

#define MAX_KERNELS 2048
typedef struct emu_kernel {
  const iron_ir_op_t *op;
  char *src, *name;
  void *sym;
} emu_kernel_t;
static emu_kernel_t g_kernels[MAX_KERNELS];
static int g_nkernels;

typedef struct program {
  char name[128];
  iron_dtype_t dtype;
  void *bytes;
  size_t size;
  iron_ir_module_t *m;  // inlined and fused for CUDA
} program_t;

static bool is_ew_kernel_op(const iron_ir_op_t *op) {
  return op->kind == IRON_OP_FUSION ||
         (g_ew_table[op->kind] != NULL &&
          iron_cuda_kernel_lookup(op->kind) == g_ew_table[op->kind]);
}

// Generates the CUDA kernels of every element-wise op and fusion of
// function bodies (not of kernel regions) into g_kernels.
static iron_status_t gen_block(const iron_ir_block_t *b) {
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (!is_ew_kernel_op(op)) continue;
    const iron_kernel_t *k = op->kind == IRON_OP_FUSION
                                 ? &iron_cuda_fusion_kernel
                                 : iron_cuda_kernel_lookup(op->kind);
    iron_region_t *regions[4] = {NULL, NULL, NULL, NULL};
    void *params = NULL;
    IRON_RETURN_IF_ERROR_PLAIN(
        k->prepare_on((iron_device_t *)g_dev, op, regions, &params));
    const iron_cuda_ew_params_t *p = params;
    const char *src = NULL;
    size_t np = iron_cuda_compiler_pending_count(g_dev);
    for (size_t s = 0; s < np && !src; ++s) {
      const char *t = iron_cuda_compiler_pending_source(g_dev, s);
      if (strstr(t, p->fn->name)) src = t;
    }
    if (!src || g_nkernels >= MAX_KERNELS) {
      free(params);
      return IRON_ERR(INTERNAL, "no source for %s", op->name);
    }
    emu_kernel_t *ek = &g_kernels[g_nkernels++];
    ek->op = op;
    ek->src = strdup(src);
    ek->name = strdup(p->fn->name);
    free(params);
  }
  return IRON_OK;
}

static const emu_kernel_t *kernel_of(const iron_ir_op_t *op) {
  for (int i = 0; i < g_nkernels; ++i)
    if (g_kernels[i].op == op) return &g_kernels[i];
  return NULL;
}

static iron_status_t read_file(const char *path, void **out, size_t *out_n) {
  FILE *f = fopen(path, "rb");
  if (!f) return IRON_ERR(NOT_FOUND, "cannot open %s", path);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *buf = malloc((size_t)n + 1);
  size_t got = buf ? fread(buf, 1, (size_t)n, f) : 0;
  fclose(f);
  if (!buf || got != (size_t)n) {
    free(buf);
    return IRON_ERR(INTERNAL, "cannot read %s", path);
  }
  *out = buf;
  *out_n = (size_t)n;
  return IRON_OK;
}

static iron_status_t program_load(program_t *p) {
  IRON_RETURN_IF_ERROR_PLAIN(iron_stablehlo_read(p->bytes, p->size, &p->m));
  IRON_RETURN_IF_ERROR_PLAIN(iron_compiler_tuple_forward(p->m));
  IRON_RETURN_IF_ERROR_PLAIN(iron_compiler_inline_for_compile(p->m, true));
  int n = 0;
  IRON_RETURN_IF_ERROR_PLAIN(iron_compiler_fuse(p->m, iron_cuda_fusable, &n));
  for (uint32_t f = 0; f < p->m->num_funcs; ++f)
    IRON_RETURN_IF_ERROR_PLAIN(gen_block(&p->m->funcs[f].body.blocks[0]));
  return IRON_OK;
}

// --- evaluation
// ---------------------------------------------------------------

static iron_tensor_t *tensor_of(const iron_ir_type_t *t) {
  return ht_tensor(t->dtype, t->rank, t->dims);
}

static iron_tensor_t *tensor_copy(const iron_tensor_t *t) {
  iron_tensor_t *c = ht_tensor(t->dtype, t->rank, t->dims);
  memcpy(c->data, t->data, t->nbytes);
  return c;
}

// Generated kernels take their input and output pointers only; every
// kernel is called through this type with unused trailing arguments (the
// x86-64 and AArch64 calling conventions ignore them).
enum { kMaxArgs = 32 };
typedef void (*kfn_t)(void *, void *, void *, void *, void *, void *, void *,
                      void *, void *, void *, void *, void *, void *, void *,
                      void *, void *, void *, void *, void *, void *, void *,
                      void *, void *, void *, void *, void *, void *, void *,
                      void *, void *, void *, void *);

static iron_status_t eval_func(const iron_ir_module_t *m,
                               const iron_ir_func_t *f, iron_tensor_t **args,
                               iron_tensor_t **results);

static const iron_ir_func_t *func_named(const iron_ir_module_t *m,
                                        const char *name) {
  if (name && name[0] == '@') name++;
  for (uint32_t i = 0; name && i < m->num_funcs; ++i)
    if (m->funcs[i].name && strcmp(m->funcs[i].name, name) == 0)
      return &m->funcs[i];
  return NULL;
}

static iron_status_t eval_block(const iron_ir_module_t *m,
                                const iron_ir_block_t *b, uint32_t num_values,
                                int64_t ew_count, iron_tensor_t **args,
                                iron_tensor_t **results);

static bool region_is_elementwise(const iron_ir_region_t *r) {
  const iron_ir_block_t *b = &r->blocks[0];
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->kind == IRON_OP_RETURN || op->kind == IRON_OP_CONSTANT) continue;
    const iron_kernel_t *k = iron_reference_kernel_lookup(op->kind);
    if (!k || !k->elementwise || op->num_regions) return false;
  }
  return true;
}

// Values of a region's block are numbered within the enclosing function.
static uint32_t region_num_values(const iron_ir_region_t *r) {
  const iron_ir_op_t *op = r->parent;
  while (op && op->parent && op->parent->parent && op->parent->parent->parent)
    op = op->parent->parent->parent;
  uint32_t n = 0;
  const iron_ir_block_t *b = &r->blocks[0];
  for (uint32_t i = 0; i < b->num_args; ++i)
    if (b->args[i].id + 1 > n) n = b->args[i].id + 1;
  for (uint32_t i = 0; i < b->num_ops; ++i)
    for (uint32_t k = 0; k < b->ops[i]->num_results; ++k)
      if (b->ops[i]->results[k].id + 1 > n) n = b->ops[i]->results[k].id + 1;
  for (uint32_t i = 0; i < b->num_ops; ++i)
    for (uint32_t k = 0; k < b->ops[i]->num_operands; ++k)
      if (b->ops[i]->operands[k]->id + 1 > n)
        n = b->ops[i]->operands[k]->id + 1;
  (void)op;
  return n;
}

// call_region for the host kernels: the region's ops on the given tensors
// (element-wise mode: every value of the common count).
static iron_status_t region_call(const iron_kernel_ctx_t *ctx,
                                 const iron_region_t *region,
                                 const iron_tensor_t *const *inputs,
                                 iron_tensor_t *const *outputs) {
  (void)ctx;
  const iron_ir_block_t *b = &region->ir->blocks[0];
  int64_t count = 1;
  for (uint32_t i = 0; i < b->num_args; ++i)
    if (inputs[i]->count > count) count = inputs[i]->count;
  iron_tensor_t *res[32] = {0};
  IRON_RETURN_IF_ERROR_PLAIN(eval_block(
      region->module, b, region_num_values(region->ir),
      region->elementwise ? count : -1, (iron_tensor_t **)inputs, res));
  uint32_t nres = 0;
  while (nres < 32 && res[nres]) nres++;
  for (uint32_t i = 0; i < nres; ++i) {
    size_t n = res[i]->nbytes < outputs[i]->nbytes ? res[i]->nbytes
                                                   : outputs[i]->nbytes;
    if (res[i]->count == 1 && outputs[i]->count > 1) {
      size_t es = iron_dtype_size(res[i]->dtype);
      for (int64_t e = 0; e < outputs[i]->count; ++e)
        memcpy((char *)outputs[i]->data + e * es, res[i]->data, es);
    } else {
      memcpy(outputs[i]->data, res[i]->data, n);
    }
    ht_tensor_free(res[i]);
  }
  return IRON_OK;
}

static iron_status_t eval_op(const iron_ir_module_t *m, const iron_ir_op_t *op,
                             iron_tensor_t **in, iron_tensor_t **out) {
  if (op->kind == IRON_OP_CONSTANT) {
    const iron_ir_attr_t *a = iron_ir_op_attr(op, "value");
    if (!a || a->kind != IRON_ATTR_DENSE)
      return IRON_ERR(UNIMPLEMENTED, "constant without a dense value");
    size_t es = iron_dtype_size(out[0]->dtype);
    for (int64_t i = 0; i < out[0]->count; ++i)
      memcpy((char *)out[0]->data + i * es,
             (const char *)a->dense.data +
                 (a->dense.size == out[0]->nbytes ? i * es : 0),
             es);
    return IRON_OK;
  }
  if (op->kind == IRON_OP_FUNC_CALL || op->kind == IRON_OP_COMPOSITE) {
    const iron_ir_func_t *callee = func_named(
        m, iron_ir_op_string(
               op, op->kind == IRON_OP_FUNC_CALL ? "callee" : "decomposition"));
    if (!callee) return IRON_ERR(NOT_FOUND, "%s: no callee", op->name);
    iron_tensor_t *res[kMaxArgs] = {0};
    IRON_RETURN_IF_ERROR_PLAIN(eval_func(m, callee, in, res));
    for (uint32_t i = 0; i < op->num_results; ++i) {
      memcpy(out[i]->data, res[i]->data, out[i]->nbytes);
      ht_tensor_free(res[i]);
    }
    return IRON_OK;
  }
  const emu_kernel_t *k = kernel_of(op);
  if (k) {
    void *a[kMaxArgs] = {0};
    uint32_t n = 0;
    if (op->num_operands + op->num_results > kMaxArgs || !k->sym)
      return IRON_ERR(UNIMPLEMENTED, "%s: %u kernel arguments", op->name,
                      op->num_operands + op->num_results);
    for (uint32_t i = 0; i < op->num_operands; ++i) a[n++] = in[i]->data;
    for (uint32_t i = 0; i < op->num_results; ++i) a[n++] = out[i]->data;
    kfn_t fn;
    memcpy(&fn, &k->sym, sizeof(fn));
    fn(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
       a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21],
       a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31]);
    return IRON_OK;
  }
  const iron_kernel_t *hk = iron_reference_kernel_lookup(op->kind);
  if (!hk || !hk->prepare)
    return IRON_ERR(UNIMPLEMENTED, "%s: no host kernel", op->name);
  // Regions (reduce bodies, comparators) as the plan describes them; the
  // host kernels call them back through call_region (region_call below).
  iron_region_t rs[4], *regions[4];
  if (op->num_regions > 4)
    return IRON_ERR(UNIMPLEMENTED, "%s with %u regions", op->name,
                    op->num_regions);
  for (uint32_t r = 0; r < op->num_regions; ++r) {
    rs[r].ir = &op->regions[r];
    rs[r].module = m;
    rs[r].elementwise = region_is_elementwise(&op->regions[r]);
    regions[r] = &rs[r];
  }
  void *params = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(hk->prepare(op, regions, &params));
  iron_kernel_ctx_t ctx = {0};
  ctx.call_region = region_call;
  iron_status_t st = hk->run(&ctx, params, (const iron_tensor_t *const *)in,
                             (iron_tensor_t *const *)out);
  if (hk->destroy)
    hk->destroy(params);
  else
    free(params);
  return st;
}

static iron_status_t eval_block(const iron_ir_module_t *m,
                                const iron_ir_block_t *b, uint32_t num_values,
                                int64_t ew_count, iron_tensor_t **args,
                                iron_tensor_t **results) {
  iron_tensor_t **v = calloc(num_values + 1, sizeof(*v));
  if (!v) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  for (uint32_t i = 0; i < b->num_args; ++i)
    v[b->args[i].id] = tensor_copy(args[i]);
  iron_status_t st = IRON_OK;
  for (uint32_t i = 0; i < b->num_ops && !st; ++i) {
    const iron_ir_op_t *op = b->ops[i];
    if (op->kind == IRON_OP_FUNC_RETURN || op->kind == IRON_OP_RETURN) {
      for (uint32_t r = 0; r < op->num_operands; ++r)
        results[r] = tensor_copy(v[op->operands[r]->id]);
      break;
    }
    iron_tensor_t *in[kMaxArgs], *out[kMaxArgs];
    if (op->num_operands > kMaxArgs || op->num_results > kMaxArgs) {
      st = IRON_ERR(UNIMPLEMENTED, "%s: too many operands", op->name);
      break;
    }
    int64_t n = 1;
    for (uint32_t k = 0; k < op->num_operands; ++k) {
      in[k] = v[op->operands[k]->id];
      if (!in[k]) {
        st =
            IRON_ERR(UNIMPLEMENTED, "%s: operand %u from outside", op->name, k);
        break;
      }
      if (in[k]->count > n) n = in[k]->count;
    }
    if (st) break;
    for (uint32_t k = 0; k < op->num_results; ++k) {
      const iron_ir_type_t *t = op->results[k].type;
      // Element-wise mode: every value has the common count.
      out[k] = v[op->results[k].id] =
          ew_count >= 0 && op->kind != IRON_OP_CONSTANT
              ? ht_tensor(t->dtype, 1, &n)
              : tensor_of(t);
    }
    st = eval_op(m, op, in, out);
    if (st) st = iron_status_annotate(st, "while emulating %s", op->name);
  }
  for (uint32_t i = 0; i < num_values; ++i) ht_tensor_free(v[i]);
  free(v);
  return st;
}

static iron_status_t eval_func(const iron_ir_module_t *m,
                               const iron_ir_func_t *f, iron_tensor_t **args,
                               iron_tensor_t **results) {
  return eval_block(m, &f->body.blocks[0], f->num_values, -1, args, results);
}

// --- the programs
// ----------------------------------------------------------------

#define MAX_PROGRAMS 128
static program_t g_programs[MAX_PROGRAMS];
static int g_nprograms;

static void load_programs(void) {
  const char *dir = IRON_TEST_DATA_DIR "/complex_plane";
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && g_nprograms < MAX_PROGRAMS) {
    size_t l = strlen(e->d_name);
    if (l < 7 || strcmp(e->d_name + l - 7, ".mlirbc") != 0) continue;
    program_t *p = &g_programs[g_nprograms];
    snprintf(p->name, sizeof(p->name), "%.*s", (int)(l - 7), e->d_name);
    p->dtype = strstr(p->name, "complex128") ? IRON_DTYPE_C128 : IRON_DTYPE_C64;
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    CHECK_OK(read_file(path, &p->bytes, &p->size));
    g_nprograms++;
  }
  closedir(d);
}

// Runs p on device 0 of rt (the host, or a GPU).
static iron_status_t run_on_device(iron_runtime_t *rt, const program_t *p,
                                   const iron_tensor_t *x,
                                   iron_tensor_t **out) {
  iron_executable_t *exe = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_executable_compile(rt, p->bytes, p->size, NULL, &exe));
  iron_buffer_t *arg = NULL, *res = NULL;
  iron_status_t st =
      iron_buffer_create_from_host(iron_runtime_device(rt, 0), x->dtype,
                                   x->rank, x->dims, x->data, NULL, &arg);
  if (!st) st = iron_executable_execute(exe, &arg, 1, NULL, &res, NULL);
  if (!st) {
    iron_dtype_t dt;
    int32_t rank;
    const int64_t *dims;
    iron_executable_output_type(exe, 0, &dt, &rank, &dims);
    *out = ht_tensor(dt, rank, dims);
    iron_event_t *done = NULL;
    st = iron_buffer_to_host(res, (*out)->data, (*out)->nbytes, &done);
    if (!st) st = iron_event_wait(done);
    if (done) iron_event_release(done);
  }
  if (arg) iron_buffer_release(arg);
  if (res) iron_buffer_release(res);
  iron_executable_release(exe);
  return st;
}

static bool is_transcendental_program(const char *name) {
  static const char *const kExact[] = {"conjugate", "positive", "negative",
                                       "square",    "absolute", "sign",
                                       "reciprocal"};
  for (size_t i = 0; i < sizeof(kExact) / sizeof(kExact[0]); ++i)
    if (strncmp(name, kExact[i], strlen(kExact[i])) == 0) return false;
  return true;
}

// The same programs on the CUDA device itself, where there is one: the
// GPU's libdevice and hardware against the host. Transcendental results may
// be further apart there (libdevice's f32 functions are within 2 ulps of
// the exact value, not the same rounding as the host's, and the expanded
// programs cancel): within kGpuUlps, so that what fails is a different
// class of value (NaN, infinity, sign) or a gross error.
enum { kGpuUlps = 8192 };
static void test_on_gpu(iron_runtime_t *host) {
  const char *why = NULL;
  if (iron_cuda_device_count(&why) == 0) {
    bool req = getenv("IRON_TEST_REQUIRE_CUDA") &&
               strcmp(getenv("IRON_TEST_REQUIRE_CUDA"), "1") == 0;
    fprintf(stderr, "no GPU (%s): the CUDA device itself not compared\n",
            why ? why : "");
    CHECK(!req);
    return;
  }
  setenv("IRON_DEVICE", "cuda", 1);
  iron_runtime_t *gpu = NULL;
  CHECK_OK(iron_runtime_create(NULL, &gpu));
  setenv("IRON_DEVICE", "host", 1);
  if (!gpu) return;
  int bad_programs = 0;
  int64_t ulp_elems = 0;
  for (int i = 0; i < g_nprograms; ++i) {
    program_t *p = &g_programs[i];
    iron_tensor_t *x = grid_tensor(p->dtype);
    iron_tensor_t *want = NULL, *got = NULL;
    CHECK_OK(run_on_device(host, p, x, &want));
    iron_status_t st = run_on_device(gpu, p, x, &got);
    if (st) fprintf(stderr, "%s on the GPU: ", p->name);
    CHECK_OK(st);
    if (want && got) {
      char what[160];
      snprintf(what, sizeof(what), "%.120s (GPU)", p->name);
      int64_t bad = compare(what, x, got, want,
                            is_transcendental_program(p->name) ? kGpuUlps : 0,
                            &ulp_elems);
      if (bad) {
        fprintf(stderr, "%s: %lld parts on the GPU differ from the host's\n",
                p->name, (long long)bad);
        bad_programs++;
      }
    }
    ht_tensor_free(want);
    ht_tensor_free(got);
    ht_tensor_free(x);
  }
  CHECK_EQ_INT(bad_programs, 0);
  fprintf(stderr,
          "complex plane on the GPU: %d programs, %d differ; %lld result "
          "parts within %d ulps of the host's\n",
          g_nprograms, bad_programs, (long long)ulp_elems, (int)kGpuUlps);
  iron_runtime_release(gpu);
}

static void test_complex_plane(void) {
  load_programs();
  CHECK(g_nprograms >= 50);
  setenv("IRON_DEVICE", "host", 1);
  iron_runtime_t *host = NULL;
  CHECK_OK(iron_runtime_create(NULL, &host));
  if (!host) return;
  for (int i = 0; i < g_nprograms; ++i) {
    iron_status_t st = program_load(&g_programs[i]);
    if (st) fprintf(stderr, "%s: ", g_programs[i].name);
    CHECK_OK(st);
  }
  const char **srcs = calloc((size_t)g_nkernels + 1, sizeof(*srcs));
  for (int i = 0; i < g_nkernels; ++i) srcs[i] = g_kernels[i].src;
  const char *dump = getenv("IRON_TEST_DUMP");
  FILE *df = dump ? fopen(dump, "w") : NULL;
  for (int i = 0; df && i < g_nkernels; ++i)
    fprintf(df, "// --- %s (%s)\n%s\n", g_kernels[i].name,
            g_kernels[i].op->name,
            g_kernels[i].src + strlen(iron_cuda_prelude()));
  if (df) fclose(df);
  cuda_emu_lib_t lib;
  bool built = cuda_emu_have_cxx() &&
               cuda_emu_build(srcs, g_nkernels, iron_cuda_prelude(), &lib);
  free(srcs);
  CHECK(built);
  if (!built) {
    iron_runtime_release(host);
    return;
  }
  for (int i = 0; i < g_nkernels; ++i) {
    g_kernels[i].sym = cuda_emu_sym(&lib, g_kernels[i].name);
    CHECK(g_kernels[i].sym != NULL);
  }
  int bad_programs = 0;
  int64_t ulp_elems = 0;
  for (int i = 0; i < g_nprograms; ++i) {
    program_t *p = &g_programs[i];
    if (!p->m) continue;
    iron_tensor_t *x = grid_tensor(p->dtype);
    iron_tensor_t *want = NULL, *got[kMaxArgs] = {0};
    CHECK_OK(run_on_device(host, p, x, &want));
#if defined(__x86_64__)
    // The device flushes f32 denormals (-ftz) as XLA:CPU and the host do.
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
#endif
    iron_tensor_t *args[1] = {x};
    iron_status_t st = eval_func(p->m, iron_ir_module_main(p->m), args, got);
#if defined(__x86_64__)
    _mm_setcsr(csr);
#endif
    if (st) fprintf(stderr, "%s: ", p->name);
    CHECK_OK(st);
    if (want && got[0]) {
      int64_t bad =
          compare(p->name, x, got[0], want,
                  is_transcendental_program(p->name) ? 4 : 0, &ulp_elems);
      if (bad) {
        fprintf(stderr, "%s: %lld parts differ from the host's\n", p->name,
                (long long)bad);
        bad_programs++;
      }
    }
    ht_tensor_free(want);
    ht_tensor_free(got[0]);
    ht_tensor_free(x);
  }
  CHECK_EQ_INT(bad_programs, 0);
  fprintf(stderr,
          "complex plane: %d programs, %d emulated CUDA kernels, %d differ; "
          "%lld result parts within 4 ulps of the host's\n",
          g_nprograms, g_nkernels, bad_programs, (long long)ulp_elems);
  cuda_emu_close(&lib);
  test_on_gpu(host);
  iron_runtime_release(host);
}

// --- every complex element-wise op, kernel by kernel
// --------------------------

typedef struct op_case {
  char what[96];
  char *src, *name;
  int nin;
  iron_tensor_t *in[2], *want;
  int64_t max_ulps;
} op_case_t;

#define MAX_OP_CASES 128
static op_case_t g_op_cases[MAX_OP_CASES];
static int g_nop_cases;

static void attr_enum(ht_op_t *b, const char *name, iron_enum_kind_t kind,
                      int32_t v) {
  uint32_t i = b->op.num_attrs++;
  b->attrs[i].kind = IRON_ATTR_ENUM;
  b->attrs[i].enumv.kind = kind;
  b->attrs[i].enumv.value = v;
  b->named[i].name = name;
  b->named[i].value = &b->attrs[i];
}

// Prepares b with the CUDA element-wise kernel and the host kernel, runs the
// host's and keeps the generated kernel for the emulation.
static void add_op_case(ht_op_t *b, iron_tensor_t **in, int64_t max_ulps,
                        const char *what) {
  const iron_kernel_t *k = g_ew_table[b->op.kind];
  CHECK(k != NULL && g_nop_cases < MAX_OP_CASES);
  if (!k || g_nop_cases >= MAX_OP_CASES) return;
  void *params = NULL;
  iron_status_t cst =
      k->prepare_on((iron_device_t *)g_dev, &b->op, NULL, &params);
  iron_tensor_t *want = ht_tensor_like(&b->result_types[0]);
  iron_status_t hst = ht_run(b, NULL, NULL, in, &want);
  if (cst || hst) {
    fprintf(stderr, "%s: %s refused: %s\n", what, cst ? "CUDA" : "host",
            iron_status_message(cst ? cst : hst));
    CHECK(false);
    iron_status_free(cst);
    iron_status_free(hst);
    if (!cst) free(params);
    ht_tensor_free(want);
    return;
  }
  const iron_cuda_ew_params_t *p = params;
  const char *src = NULL;
  size_t np = iron_cuda_compiler_pending_count(g_dev);
  for (size_t i = 0; i < np && !src; ++i) {
    const char *t = iron_cuda_compiler_pending_source(g_dev, i);
    if (strstr(t, p->fn->name)) src = t;
  }
  CHECK(src != NULL);
  op_case_t *c = &g_op_cases[g_nop_cases++];
  snprintf(c->what, sizeof(c->what), "%s", what);
  c->src = strdup(src ? src : "");
  c->name = strdup(p->fn->name);
  c->nin = (int)b->op.num_operands;
  for (int i = 0; i < c->nin; ++i) c->in[i] = in[i];
  c->want = want;
  c->max_ulps = max_ulps;
  free(params);
}

// x[i * n + j] = grid[i], y[i * n + j] = grid[j]: every pair of grid values.
static void pairs(iron_dtype_t dt, iron_tensor_t **out_x,
                  iron_tensor_t **out_y) {
  iron_tensor_t *g = grid_tensor(dt);
  int64_t n = (int64_t)kPoints * kPoints;
  *out_x = ht_tensor(dt, 1, &n);
  *out_y = ht_tensor(dt, 1, &n);
  size_t es = iron_dtype_size(dt);
  for (int64_t i = 0; i < kPoints; ++i)
    for (int64_t j = 0; j < kPoints; ++j) {
      memcpy((char *)(*out_x)->data + (i * kPoints + j) * es,
             (char *)g->data + i * es, es);
      memcpy((char *)(*out_y)->data + (i * kPoints + j) * es,
             (char *)g->data + j * es, es);
    }
  ht_tensor_free(g);
}

static void add_complex_op_cases(iron_dtype_t dt) {
  static const iron_op_kind_t kUnary[] = {IRON_OP_ABS,
                                          IRON_OP_NEGATE,
                                          IRON_OP_SIGN,
                                          IRON_OP_EXPONENTIAL,
                                          IRON_OP_EXPONENTIAL_MINUS_ONE,
                                          IRON_OP_LOG,
                                          IRON_OP_LOG_PLUS_ONE,
                                          IRON_OP_LOGISTIC,
                                          IRON_OP_SQRT,
                                          IRON_OP_RSQRT,
                                          IRON_OP_SINE,
                                          IRON_OP_COSINE,
                                          IRON_OP_TAN,
                                          IRON_OP_TANH,
                                          IRON_OP_REAL,
                                          IRON_OP_IMAG};
  int64_t n = kPoints;
  char what[96];
  for (size_t k = 0; k < sizeof(kUnary) / sizeof(kUnary[0]); ++k) {
    ht_op_t b;
    ht_init(&b, kUnary[k]);
    ht_operand(&b, dt, 1, &n);
    bool part = kUnary[k] == IRON_OP_ABS || kUnary[k] == IRON_OP_REAL ||
                kUnary[k] == IRON_OP_IMAG;
    ht_result(&b, part ? iron_dtype_complex_part(dt) : dt, 1, &n);
    iron_tensor_t *in[1] = {grid_tensor(dt)};
    snprintf(what, sizeof(what), "%s %s", iron_op_kind_name(kUnary[k]),
             iron_dtype_name(dt));
    bool exact = kUnary[k] == IRON_OP_NEGATE || kUnary[k] == IRON_OP_REAL ||
                 kUnary[k] == IRON_OP_IMAG;
    add_op_case(&b, in, exact ? 0 : 4, what);
  }
  static const iron_op_kind_t kBinary[] = {
      IRON_OP_ADD,   IRON_OP_SUBTRACT, IRON_OP_MULTIPLY, IRON_OP_DIVIDE,
      IRON_OP_POWER, IRON_OP_MAXIMUM,  IRON_OP_MINIMUM};
  int64_t nn = (int64_t)kPoints * kPoints;
  for (size_t k = 0; k < sizeof(kBinary) / sizeof(kBinary[0]); ++k) {
    ht_op_t b;
    ht_init(&b, kBinary[k]);
    ht_operand(&b, dt, 1, &nn);
    ht_operand(&b, dt, 1, &nn);
    ht_result(&b, dt, 1, &nn);
    iron_tensor_t *in[2];
    pairs(dt, &in[0], &in[1]);
    snprintf(what, sizeof(what), "%s %s", iron_op_kind_name(kBinary[k]),
             iron_dtype_name(dt));
    add_op_case(&b, in, kBinary[k] == IRON_OP_POWER ? 4 : 0, what);
  }
  for (int dir = 0; dir < 6; ++dir) {
    ht_op_t b;
    ht_init(&b, IRON_OP_COMPARE);
    ht_operand(&b, dt, 1, &nn);
    ht_operand(&b, dt, 1, &nn);
    ht_result(&b, IRON_DTYPE_PRED, 1, &nn);
    attr_enum(&b, "comparison_direction", IRON_ENUM_COMPARISON_DIRECTION, dir);
    attr_enum(&b, "compare_type", IRON_ENUM_COMPARISON_TYPE,
              IRON_CMP_TYPE_FLOAT);
    iron_tensor_t *in[2];
    pairs(dt, &in[0], &in[1]);
    snprintf(what, sizeof(what), "compare %d %s", dir, iron_dtype_name(dt));
    add_op_case(&b, in, 0, what);
  }
  // complex(re, im) from the grid's parts, and the convert to the other
  // complex width.
  {
    iron_dtype_t pt = iron_dtype_complex_part(dt);
    ht_op_t b;
    ht_init(&b, IRON_OP_COMPLEX);
    ht_operand(&b, pt, 1, &n);
    ht_operand(&b, pt, 1, &n);
    ht_result(&b, dt, 1, &n);
    iron_tensor_t *g = grid_tensor(dt);
    iron_tensor_t *re = ht_tensor(pt, 1, &n), *im = ht_tensor(pt, 1, &n);
    size_t ps = iron_dtype_size(pt);
    for (int64_t e = 0; e < n; ++e) {
      memcpy((char *)re->data + e * ps, (char *)g->data + 2 * e * ps, ps);
      memcpy((char *)im->data + e * ps, (char *)g->data + (2 * e + 1) * ps, ps);
    }
    ht_tensor_free(g);
    iron_tensor_t *in[2] = {re, im};
    snprintf(what, sizeof(what), "complex %s", iron_dtype_name(dt));
    add_op_case(&b, in, 0, what);
    ht_init(&b, IRON_OP_CONVERT);
    ht_operand(&b, dt, 1, &n);
    iron_dtype_t other =
        dt == IRON_DTYPE_C64 ? IRON_DTYPE_C128 : IRON_DTYPE_C64;
    ht_result(&b, other, 1, &n);
    iron_tensor_t *cin[1] = {grid_tensor(dt)};
    snprintf(what, sizeof(what), "convert %s -> %s", iron_dtype_name(dt),
             iron_dtype_name(other));
    add_op_case(&b, cin, 0, what);
  }
}

static void test_complex_ops(void) {
  add_complex_op_cases(IRON_DTYPE_C64);
  add_complex_op_cases(IRON_DTYPE_C128);
  CHECK(g_nop_cases >= 60);
  const char **srcs = calloc((size_t)g_nop_cases + 1, sizeof(*srcs));
  for (int i = 0; i < g_nop_cases; ++i) srcs[i] = g_op_cases[i].src;
  cuda_emu_lib_t lib;
  bool built = cuda_emu_have_cxx() &&
               cuda_emu_build(srcs, g_nop_cases, iron_cuda_prelude(), &lib);
  free(srcs);
  CHECK(built);
  int bad_cases = 0;
  int64_t ulp_elems = 0;
  for (int i = 0; built && i < g_nop_cases; ++i) {
    op_case_t *c = &g_op_cases[i];
    void *sym = cuda_emu_sym(&lib, c->name);
    CHECK(sym != NULL);
    if (!sym) continue;
    iron_tensor_t *got =
        ht_tensor(c->want->dtype, c->want->rank, c->want->dims);
    void *a[kMaxArgs] = {0};
    for (int k = 0; k < c->nin; ++k) a[k] = c->in[k]->data;
    a[c->nin] = got->data;
    kfn_t fn;
    memcpy(&fn, &sym, sizeof(fn));
#if defined(__x86_64__)
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
#endif
    fn(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11],
       a[12], a[13], a[14], a[15], a[16], a[17], a[18], a[19], a[20], a[21],
       a[22], a[23], a[24], a[25], a[26], a[27], a[28], a[29], a[30], a[31]);
#if defined(__x86_64__)
    _mm_setcsr(csr);
#endif
    int64_t bad = compare(c->what, c->nin == 1 ? c->in[0] : NULL, got, c->want,
                          c->max_ulps, &ulp_elems);
    if (bad) {
      fprintf(stderr, "%s: %lld parts differ from the host's\n", c->what,
              (long long)bad);
      bad_cases++;
    }
    ht_tensor_free(got);
  }
  CHECK_EQ_INT(bad_cases, 0);
  fprintf(stderr,
          "complex ops: %d kernels emulated, %d differ; %lld result parts "
          "within 4 ulps of the host's\n",
          g_nop_cases, bad_cases, (long long)ulp_elems);
  if (built) cuda_emu_close(&lib);
  // NVRTC compiles the generated kernels (one program).
  if (cuda_test_load_nvrtc(&g_api)) {
    const char *prelude = iron_cuda_prelude();
    size_t pl = strlen(prelude), len = pl + 1;
    for (int i = 0; i < g_nop_cases; ++i) len += strlen(g_op_cases[i].src) + 64;
    char *text = malloc(len);
    size_t at = (size_t)snprintf(text, len, "%s", prelude);
    for (int i = 0; i < g_nop_cases; ++i) {
      const char *s = g_op_cases[i].src;
      bool dup = false;
      for (int j = 0; j < i && !dup; ++j)
        dup = strcmp(g_op_cases[j].src, s) == 0;
      if (dup || strncmp(s, prelude, pl) != 0) continue;
      at += (size_t)snprintf(text + at, len - at, "namespace n%d {\n%s\n}\n", i,
                             s + pl);
    }
    void *cubin = NULL;
    size_t size = 0;
    CHECK_OK(iron_cuda_nvrtc_compile(&g_api, text, "sm_90a", &cubin, &size));
    free(cubin);
    free(text);
  } else {
    fprintf(stderr, "NVRTC not found: kernels not compiled\n");
  }
  for (int i = 0; i < g_nop_cases; ++i) {
    free(g_op_cases[i].src);
    free(g_op_cases[i].name);
    for (int k = 0; k < g_op_cases[i].nin; ++k)
      ht_tensor_free(g_op_cases[i].in[k]);
    ht_tensor_free(g_op_cases[i].want);
  }
}

// --- any artifacts: IRON_TEST_EMU_DIR
// -------------------------------------------

// Runs exe on rt's device 0 with `args`; *outs gets num_outputs tensors.
static iron_status_t run_args(iron_runtime_t *rt, const program_t *p,
                              iron_tensor_t **args, uint32_t nargs,
                              iron_tensor_t **outs, uint32_t *out_n) {
  iron_executable_t *exe = NULL;
  IRON_RETURN_IF_ERROR_PLAIN(
      iron_executable_compile(rt, p->bytes, p->size, NULL, &exe));
  iron_buffer_t *bufs[kMaxArgs] = {0}, *res[kMaxArgs] = {0};
  uint32_t nout = iron_executable_num_outputs(exe);
  iron_status_t st = nout > kMaxArgs || nargs > kMaxArgs
                         ? IRON_ERR(UNIMPLEMENTED, "too many arguments")
                         : IRON_OK;
  for (uint32_t i = 0; i < nargs && !st; ++i)
    st = iron_buffer_create_from_host(
        iron_runtime_device(rt, 0), args[i]->dtype, args[i]->rank,
        args[i]->dims, args[i]->data, NULL, &bufs[i]);
  if (!st) st = iron_executable_execute(exe, bufs, nargs, NULL, res, NULL);
  for (uint32_t i = 0; i < nout && !st; ++i) {
    iron_dtype_t dt;
    int32_t rank;
    const int64_t *dims;
    iron_executable_output_type(exe, i, &dt, &rank, &dims);
    outs[i] = ht_tensor(dt, rank, dims);
    iron_event_t *done = NULL;
    st = iron_buffer_to_host(res[i], outs[i]->data, outs[i]->nbytes, &done);
    if (!st) st = iron_event_wait(done);
    if (done) iron_event_release(done);
  }
  *out_n = nout;
  for (uint32_t i = 0; i < kMaxArgs; ++i) {
    if (bufs[i]) iron_buffer_release(bufs[i]);
    if (res[i]) iron_buffer_release(res[i]);
  }
  iron_executable_release(exe);
  return st;
}

// Random operands: floats in [-2, 2] (and a few specials), integers in
// [0, 3] (valid as small indices), bools.
static iron_tensor_t *random_arg(const iron_ir_type_t *t) {
  iron_tensor_t *x = tensor_of(t);
  for (int64_t e = 0; e < x->count; ++e) {
    double v = (double)(ht_rand() % 4001) / 1000.0 - 2.0;
    switch (t->dtype) {
      case IRON_DTYPE_F32:
        ((float *)x->data)[e] = (float)v;
        break;
      case IRON_DTYPE_F64:
        ((double *)x->data)[e] = v;
        break;
      case IRON_DTYPE_C64:
        ((float *)x->data)[2 * e] = (float)v;
        ((float *)x->data)[2 * e + 1] = (float)(v * 0.5);
        break;
      case IRON_DTYPE_C128:
        ((double *)x->data)[2 * e] = v;
        ((double *)x->data)[2 * e + 1] = v * 0.5;
        break;
      case IRON_DTYPE_PRED:
        ((uint8_t *)x->data)[e] = ht_rand() & 1;
        break;
      default: {
        size_t es = iron_dtype_size(t->dtype);
        uint64_t k = ht_rand() % 4;
        if (es == 2 && iron_dtype_is_float(t->dtype)) {  // f16/bf16
          float f = (float)v;
          uint16_t h = t->dtype == IRON_DTYPE_F16 ? iron_f32_to_f16(f)
                                                  : iron_f32_to_bf16(f);
          memcpy((char *)x->data + e * 2, &h, 2);
        } else {
          memcpy((char *)x->data + e * es, &k, es < 8 ? es : 8);
        }
      }
    }
  }
  return x;
}

// Every artifact of `dir` (e.g. dumped with IRON_DUMP_DIR while a jax test
// ran on the host) runs on the host and with its CUDA element-wise/fusion
// kernels emulated, on random operands; results must agree within
// `max_ulps` ulps. Where there is a GPU, also on the CUDA device, within
// `gpu_ulps` (libdevice's f32 functions are not the host's; the largest
// distance per artifact is printed).
static void emu_dir(const char *dir, int64_t max_ulps, int64_t gpu_ulps) {
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  if (!d) return;
  static program_t progs[512];
  int np = 0;
  int kernels_before = g_nkernels;
  struct dirent *e;
  while ((e = readdir(d)) != NULL && np < 512) {
    size_t l = strlen(e->d_name);
    if (l < 7 || strcmp(e->d_name + l - 7, ".mlirbc") != 0) continue;
    program_t *p = &progs[np];
    snprintf(p->name, sizeof(p->name), "%.*s", (int)(l - 7), e->d_name);
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
    CHECK_OK(read_file(path, &p->bytes, &p->size));
    iron_status_t st = program_load(p);
    if (st) {
      fprintf(stderr, "%s: not emulated: %s\n", p->name,
              iron_status_message(st));
      iron_status_free(st);
      continue;
    }
    np++;
  }
  closedir(d);
  int nk = g_nkernels - kernels_before;
  const char **srcs = calloc((size_t)nk + 1, sizeof(*srcs));
  for (int i = 0; i < nk; ++i) srcs[i] = g_kernels[kernels_before + i].src;
  cuda_emu_lib_t lib;
  bool built = nk == 0 || (cuda_emu_have_cxx() &&
                           cuda_emu_build(srcs, nk, iron_cuda_prelude(), &lib));
  free(srcs);
  CHECK(built);
  if (!built) return;
  for (int i = kernels_before; nk && i < g_nkernels; ++i)
    g_kernels[i].sym = cuda_emu_sym(&lib, g_kernels[i].name);
  setenv("IRON_DEVICE", "host", 1);
  iron_runtime_t *host = NULL;
  CHECK_OK(iron_runtime_create(NULL, &host));
  iron_runtime_t *gpu = NULL;
  if (iron_cuda_device_count(NULL) > 0) {
    setenv("IRON_DEVICE", "cuda", 1);
    CHECK_OK(iron_runtime_create(NULL, &gpu));
    setenv("IRON_DEVICE", "host", 1);
  }
  int bad = 0, ran = 0, gpu_bad = 0;
  int64_t ulp_parts = 0, gpu_ulp_parts = 0;
  for (int i = 0; host && i < np; ++i) {
    program_t *p = &progs[i];
    const iron_ir_func_t *f = iron_ir_module_main(p->m);
    const iron_ir_block_t *b = &f->body.blocks[0];
    iron_tensor_t *args[kMaxArgs] = {0}, *want[kMaxArgs] = {0},
                  *got[kMaxArgs] = {0};
    uint32_t nargs = b->num_args < kMaxArgs ? b->num_args : kMaxArgs, nout = 0;
    for (uint32_t a = 0; a < nargs; ++a) args[a] = random_arg(b->args[a].type);
    iron_status_t st = run_args(host, p, args, nargs, want, &nout);
#if defined(__x86_64__)
    unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x8040u);
#endif
    if (!st) st = eval_func(p->m, f, args, got);
#if defined(__x86_64__)
    _mm_setcsr(csr);
#endif
    if (st) {
      fprintf(stderr, "%s: not compared: %s\n", p->name,
              iron_status_message(st));
      iron_status_free(st);
    } else {
      ran++;
      int64_t nb = 0;
      for (uint32_t o = 0; o < nout; ++o)
        if (want[o] && got[o])
          nb += compare(p->name, NULL, got[o], want[o], max_ulps, &ulp_parts);
      if (nb) {
        fprintf(stderr, "%s: %lld parts differ from the host's\n", p->name,
                (long long)nb);
        bad++;
      }
    }
    iron_tensor_t *dev_out[kMaxArgs] = {0};
    uint32_t ndev = 0;
    if (gpu && !run_args(gpu, p, args, nargs, dev_out, &ndev)) {
      int64_t nb = 0, worst = 0;
      for (uint32_t o = 0; o < ndev && o < nout; ++o) {
        if (!want[o] || !dev_out[o]) continue;
        char what[160];
        snprintf(what, sizeof(what), "%.120s (GPU)", p->name);
        nb +=
            compare(what, NULL, dev_out[o], want[o], gpu_ulps, &gpu_ulp_parts);
        for (int64_t q = 0; q < num_parts(want[o]); ++q) {
          int64_t dq =
              part_diff(want[o]->dtype, dev_out[o]->data, want[o]->data, q);
          if (dq > worst && dq != INT64_MAX) worst = dq;
        }
      }
      fprintf(stderr, "%s on the GPU: %lld ulps at most%s\n", p->name,
              (long long)worst, nb ? ", DIFFERS" : "");
      if (nb) gpu_bad++;
    }
    for (uint32_t o = 0; o < kMaxArgs; ++o) ht_tensor_free(dev_out[o]);
    for (uint32_t a = 0; a < kMaxArgs; ++a) {
      ht_tensor_free(args[a]);
      ht_tensor_free(want[a]);
      ht_tensor_free(got[a]);
    }
  }
  CHECK_EQ_INT(bad, 0);
  CHECK_EQ_INT(gpu_bad, 0);
  fprintf(stderr,
          "%s: %d artifacts compared (%d loaded), %d CUDA kernels emulated, "
          "%d differ; %lld parts within %lld ulps\n",
          dir, ran, np, nk, bad, (long long)ulp_parts, (long long)max_ulps);
  if (gpu)
    fprintf(stderr, "  on the GPU: %d differ, %lld parts within %lld ulps\n",
            gpu_bad, (long long)gpu_ulp_parts, (long long)gpu_ulps);
  if (nk) cuda_emu_close(&lib);
  if (gpu) iron_runtime_release(gpu);
  iron_runtime_release(host);
}

// tests/data/emu_programs: jax programs whose CUDA kernels are checked this
// way in every run (scan_grad_*: the programs of jax's
// testScanGrad_jit_scan=False_jit_f=False_impl=unroll0, dumped on the
// host). IRON_TEST_EMU_DIR=DIR adds a directory of one's own, compared
// within IRON_TEST_EMU_ULPS (default 64) ulps.
static void test_emu_dir(void) {
  emu_dir(IRON_TEST_DATA_DIR "/emu_programs", 0, kGpuUlps);
  const char *dir = getenv("IRON_TEST_EMU_DIR");
  int64_t ulps =
      getenv("IRON_TEST_EMU_ULPS") ? atoll(getenv("IRON_TEST_EMU_ULPS")) : 64;
  if (dir && *dir) emu_dir(dir, ulps, ulps);
}

static void test_setup(void) {
  const char *v = getenv("IRON_TEST_VERBOSE");
  if (v && strcmp(v, "1") == 0) g_print_max = 1 << 30;
  g_dev = calloc(1, sizeof(*g_dev));
  snprintf(g_dev->arch, sizeof(g_dev->arch), "sm_90a");
  g_dev->num_sms = 132;
  g_dev->api = &g_api;
  iron_cuda_register_elementwise(g_ew_table);
  CHECK(g_dev != NULL);
}

static const iron_test_case_t kTests[] = {
    {"setup", test_setup},
    {"complex_ops", test_complex_ops},
    {"complex_plane", test_complex_plane},
    {"emu_dir", test_emu_dir},
};

IRON_TEST_MAIN(kTests)
