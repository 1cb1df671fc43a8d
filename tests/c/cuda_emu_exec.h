// Whole programs as the CUDA device plans them, run on the CPU (GPU-free):
// a runtime whose host device fuses with the CUDA device's predicate
// (iron_cuda_fusable, src/compiler/fuse.c) and runs the CUDA device's own
// generated kernels for fusions, element-wise ops and data movement
// (prepared by cuda_fusion.c / cuda_elementwise.c / cuda_shape.c on a fake
// sm_90a device, compiled as host C++ by cuda_emu.h, one thread). Every
// other op (dot, reduce, sort, ...) runs its host kernel. Running a
// program here and on a plain host runtime and comparing the results bit
// for bit checks the CUDA fusion pass and code generators on whole
// programs (loops, scans, branches included).
//
// Kernels are collected while programs compile and built once
// (cuda_emu_exec_build: one C++ compile for all), so compile every program
// first, then build, then run.
//
// Limits of the emulation: kernels whose launch grid is fixed by their
// generator (tiled transposes) and fusions that end in a reduce (their
// reduce kernels split work over blocks and warps) cannot run on one
// thread: such ops fall back to their host kernel / make
// cuda_emu_exec_prepare refuse the program (counted by the caller), unless
// the caller sets g_cuda_emu.multi_thread: then they run on their real
// grid through cuda_emu.h's multi-thread shim (block threads as fibers).
// Fusions with tiled pivot transposes (gen/fusion.c) always run there.
// Row fusions (src/compiler/fuse_rows.h) always run on the multi-thread
// shim (real blocks, shared memory, barriers, warp shuffles), with their
// real launch shape.
#ifndef IRON_TESTS_CUDA_EMU_EXEC_H_
#define IRON_TESTS_CUDA_EMU_EXEC_H_

#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "base/half.h"
#include "cuda_emu.h"
#include "device/cuda/gen/prelude.h"
#include "device/cuda/gen/source.h"
#include "device/cuda/gen/types.h"
#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_device.h"
#include "device/cuda/cuda_fusion.h"
#include "device/cuda/cuda_ops_internal.h"
#include "device/plans/reduce_plan.h"
#include "device/cuda/cuda_row_fusion.h"
#include "device/device.h"
#include "iron/iron.h"
#include "runtime/runtime_internal.h"

typedef struct cuda_emu_kernel {
  char *name, *source;  // source: a complete translation unit (prelude first)
  void (*call)(void *const *args);  // after cuda_emu_exec_build
  bool mt;     // launched on its grid by the multi-thread shim
  size_t lib;  // mt: its library (index into libs)
} cuda_emu_kernel_t;

typedef struct cuda_emu_exec {
  iron_cuda_device_t *fake;  // prepares (queues sources; no GPU, no NVRTC)
  iron_cuda_kernel_table_t cuda;
  iron_kernel_t kernels[IRON_OP_COUNT];  // the emulated wrappers
  bool emulated[IRON_OP_COUNT];
  iron_device_vtable_t vtable;  // the host's, fusing as CUDA does
  // The host's destroy, and the devices that use `vtable` and are not
  // destroyed yet: a device's last runtime reference may be dropped by a
  // job on its worker after the test released the runtime, and shutdown
  // must not tear the vtable and the kernels down before that.
  void (*host_destroy)(iron_device_t *dev);
  atomic_int live_devices;
  cuda_emu_kernel_t *k;
  size_t num_k, cap_k, built_k;
  cuda_emu_lib_t *libs;  // one per build
  size_t num_libs;
  bool flush;  // FTZ/DAZ around kernels, as NVRTC's -ftz
  // Counters (for the caller's report).
  int64_t launches, fused_launches;
  int64_t row_launches;    // row fusion kernels (multi-thread shim)
  int64_t host_fallbacks;  // ops prepared for the host instead
  uint32_t max_fused_params;  // the most pointers a fusion kernel took
  // Optional (tests of the tests): returns a malloc'ed replacement of a
  // kernel's source before it is built (a planted bug), or NULL to keep
  // it; `fused`: the kernel of an iron.fusion op.
  char *(*plant)(const char *name, const char *source, bool fused);
  int64_t planted;  // sources the plant changed
  // Set by the caller before compiling: kernels of a fixed grid and fused
  // reduces run on the multi-thread shim instead of the host kernel /
  // being refused.
  bool multi_thread;
  // IRON_TEST_EMU_ALL_GRID=1 (with multi_thread): every element-wise and
  // fused kernel runs on the grid the device would launch, not one thread
  // (indexing from blockIdx/threadIdx, grid-stride loops, vector tails).
  bool all_grid;
  int64_t mt_launches;
  // Fused reduces prepared whose float sums the CUDA kernel splits over
  // blocks (gen/reduce.c: partials merged by a tile's last block): a
  // summation order of the kernel's own, so their results may differ
  // from the host's in the last bits (the caller compares them within a
  // tolerance; see cuda_emu_compare_within).
  int64_t split_sums;
} cuda_emu_exec_t;

static cuda_emu_exec_t g_cuda_emu;

typedef struct cuda_emu_params {
  const iron_kernel_t *cuda_k;  // the CUDA kernel (params owner)
  void *cuda_params;                 // iron_cuda_ew_params_t (first member)
  const iron_kernel_t *host_k;  // non-NULL: runs on the host instead
  void *host_params;
  // The launches: part k is parts[k] on inputs[first[k]..] (one part but
  // for iron_cuda_ew_multi_run kernels).
  uint32_t num_parts;
  const iron_cuda_ew_params_t *parts;
  const uint32_t *first;
  size_t *kernel;        // per part: index into g_cuda_emu.k
  bool dus;              // an unfused dynamic_update_slice
  bool dus_full;         // ... whose update covers the operand
  size_t dus_bytes;
  bool fused;
  bool mt;   // the parts run on the multi-thread shim
  bool row;  // a row fusion (always mt)
  // A reduce, gather or scatter: the CUDA kernel's one launch
  // (iron_cuda_op_launch_t, the first member of cuda_params) on the
  // multi-thread shim; n_in/n_out the op's operands/results; scatter
  // copies its n_out operands (op_bytes each) into its results first.
  bool op_launch;
  bool scatter;
  uint32_t n_in, n_out;
  size_t *op_bytes;
} cuda_emu_params_t;

static inline size_t cuda_emu_kernel_index(const char *name, const char *source,
                                           bool fused) {
  cuda_emu_exec_t *e = &g_cuda_emu;
  for (size_t i = 0; i < e->num_k; ++i)
    if (strcmp(e->k[i].name, name) == 0) return i;
  char *planted = e->plant && source ? e->plant(name, source, fused) : NULL;
  if (planted) {
    e->planted++;
    source = planted;
  }
  if (e->num_k == e->cap_k) {
    e->cap_k = e->cap_k ? 2 * e->cap_k : 256;
    e->k = realloc(e->k, e->cap_k * sizeof(*e->k));
  }
  cuda_emu_kernel_t *k = &e->k[e->num_k];
  memset(k, 0, sizeof(*k));
  k->name = strdup(name);
  k->source = source ? strdup(source) : NULL;
  free(planted);
  return e->num_k++;
}

// The source that defines kernel `name` among the fake compiler's pending
// sources (its `extern "C"` definition), or NULL.
static inline const char *cuda_emu_find_source(const char *name) {
  iron_cuda_device_t *d = g_cuda_emu.fake;
  size_t n = iron_cuda_compiler_pending_count(d);
  char pat[200];
  snprintf(pat, sizeof(pat), " %s(", name);
  for (size_t i = n; i-- > 0;) {
    const char *s = iron_cuda_compiler_pending_source(d, i);
    if (s && strstr(s, pat)) return s;
  }
  return NULL;
}

static inline void cuda_emu_params_destroy(void *params) {
  cuda_emu_params_t *p = params;
  if (!p) return;
  if (p->cuda_k && p->cuda_params) {
    if (p->cuda_k->destroy)
      p->cuda_k->destroy(p->cuda_params);
    else
      free(p->cuda_params);
  }
  if (p->host_k && p->host_params) {
    if (p->host_k->destroy)
      p->host_k->destroy(p->host_params);
    else
      free(p->host_params);
  }
  free(p->kernel);
  free(p->op_bytes);
  free(p);
}

static inline bool cuda_emu_is_fused_reduce(const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_FUSION || op->num_regions < 1 ||
      op->regions[0].num_blocks != 1)
    return false;
  const iron_ir_block_t *b = &op->regions[0].blocks[0];
  return b->num_ops >= 2 && b->ops[b->num_ops - 2]->kind == IRON_OP_REDUCE;
}

// Kernel `name` (its source registered) for the multi-thread shim: its
// index in *out_index. A kernel already built for one thread cannot be.
static inline iron_status_t cuda_emu_claim_mt(const char *name, bool fused,
                                              size_t *out_index) {
  cuda_emu_exec_t *e = &g_cuda_emu;
  size_t i = cuda_emu_kernel_index(name, cuda_emu_find_source(name), fused);
  cuda_emu_kernel_t *k = &e->k[i];
  if (!k->mt && i < e->built_k)
    return IRON_ERR(INTERNAL, "cuda_emu: kernel %s was built for one thread",
                    name);
  k->mt = true;
  if (!k->source)
    return IRON_ERR(INTERNAL, "cuda_emu: no source for kernel %s", name);
  *out_index = i;
  return IRON_OK;
}

// p (its CUDA prepare done) runs the host's kernel instead.
static inline iron_status_t cuda_emu_use_host(cuda_emu_params_t *p,
                                              const iron_ir_op_t *op,
                                              iron_region_t *const *regions,
                                              void **out_params) {
  g_cuda_emu.host_fallbacks++;
  p->host_k = iron_reference_kernel_lookup(op->kind);
  iron_status_t st =
      p->host_k->prepare ? p->host_k->prepare(op, regions, &p->host_params)
                         : IRON_OK;
  if (st) {
    cuda_emu_params_destroy(p);
    return st;
  }
  *out_params = p;
  return IRON_OK;
}

// A float sum or product (one operand, or a variadic body that computes
// floats) whose order the CUDA reduce kernel chooses (a tree over its
// split grid, docs/ARCHITECTURE.md): the host's sequential order gives
// other bits, so the comparisons stay exact only
// with the host's kernel there (test_cuda_reduce_shapes_emu checks those
// kernels within a tolerance). Exact bodies (integers, max/min, and/or,
// argmax-style variadic bodies) run the CUDA kernel.
static inline bool cuda_emu_reduce_order_matters(const iron_ir_op_t *op) {
  if (op->kind != IRON_OP_REDUCE || op->num_regions < 1 ||
      op->regions[0].num_blocks < 1)
    return false;
  if (op->num_operands == 2) {
    iron_dtype_t dt = op->operands[0]->type->dtype;
    if (!iron_dtype_is_float(dt) && !iron_dtype_is_complex(dt)) return false;
    iron_op_kind_t k = iron_reduce_plan_body_op(&op->regions[0], dt);
    return k != IRON_OP_MAXIMUM && k != IRON_OP_MINIMUM;
  }
  // Variadic: a body that computes a float otherwise than by choosing
  // (compare, select, max/min: argmax-style) rounds in the kernel's order
  // (a sum and a product of pairs, jax's batching tests).
  const iron_ir_block_t *b = &op->regions[0].blocks[0];
  for (uint32_t i = 0; i < b->num_ops; ++i) {
    const iron_ir_op_t *o = b->ops[i];
    if (o->num_results != 1 || o->kind == IRON_OP_SELECT ||
        o->kind == IRON_OP_MAXIMUM || o->kind == IRON_OP_MINIMUM ||
        o->kind == IRON_OP_CONSTANT || o->kind == IRON_OP_CONVERT)
      continue;
    iron_dtype_t dt = o->results[0].type->dtype;
    if (iron_dtype_is_float(dt) || iron_dtype_is_complex(dt)) return true;
  }
  return false;
}

// A reduce, gather or scatter: the CUDA device's prepare (its refusals
// too), then its kernel on the multi-thread shim, or the host kernel when
// the caller runs one thread per kernel or the order of a float reduce
// decides its bits.
static inline iron_status_t cuda_emu_prepare_op_launch(
    const iron_ir_op_t *op, iron_region_t *const *regions, void **out_params) {
  cuda_emu_exec_t *e = &g_cuda_emu;
  const iron_kernel_t *ck = e->cuda[op->kind];
  cuda_emu_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  iron_status_t st =
      ck->prepare_on((iron_device_t *)e->fake, op, regions, &p->cuda_params);
  if (st) {
    free(p);
    return st;
  }
  p->cuda_k = ck;
  const char *host_ops = getenv("IRON_TEST_EMU_HOST_OPS");
  if (!e->multi_thread || cuda_emu_reduce_order_matters(op) ||
      (host_ops && host_ops[0] == '1'))
    return cuda_emu_use_host(p, op, regions, out_params);
  const iron_cuda_op_launch_t *l = p->cuda_params;
  p->op_launch = true;
  p->mt = true;
  p->scatter = op->kind == IRON_OP_SCATTER;
  p->n_in = op->num_operands;
  p->n_out = op->num_results;
  p->kernel = calloc(1, sizeof(size_t));
  p->op_bytes = calloc(p->n_out + 1, sizeof(size_t));
  if (!p->kernel || !p->op_bytes) {
    cuda_emu_params_destroy(p);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  }
  for (uint32_t i = 0; p->scatter && i < p->n_out; ++i)
    iron_ir_type_byte_size(op->operands[i]->type, &p->op_bytes[i]);
  if (!l->skip) {
    st = cuda_emu_claim_mt(l->fn->name, false, &p->kernel[0]);
    if (st) {
      cuda_emu_params_destroy(p);
      return st;
    }
  }
  *out_params = p;
  return IRON_OK;
}

static inline iron_status_t cuda_emu_prepare(iron_device_t *dev,
                                      const iron_ir_op_t *op,
                                      iron_region_t *const *regions,
                                      void **out_params) {
  (void)dev;
  cuda_emu_exec_t *e = &g_cuda_emu;
  const iron_kernel_t *ck = e->cuda[op->kind];
  if (op->kind == IRON_OP_REDUCE || op->kind == IRON_OP_GATHER ||
      op->kind == IRON_OP_SCATTER)
    return cuda_emu_prepare_op_launch(op, regions, out_params);
  if (op->kind == IRON_OP_FUSION && iron_cuda_fusion_is_row(op)) {
    // Its own launch shape, threads that cooperate: the multi-thread
    // shim runs it, whatever e->multi_thread says.
    cuda_emu_params_t *p = calloc(1, sizeof(*p));
    if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
    p->fused = true;
    p->mt = true;
    p->row = true;
    iron_status_t st =
        ck->prepare_on((iron_device_t *)e->fake, op, regions, &p->cuda_params);
    if (st) {
      free(p);
      return st;
    }
    p->cuda_k = ck;
    static const uint32_t kFirst0 = 0;
    p->num_parts = 1;
    p->parts = p->cuda_params;
    p->first = &kFirst0;
    p->kernel = calloc(2, sizeof(size_t));
    st = p->kernel ? cuda_emu_claim_mt(p->parts[0].fn->name, true,
                                       &p->kernel[0])
                   : IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
    if (st) {
      cuda_emu_params_destroy(p);
      return st;
    }
    *out_params = p;
    return IRON_OK;
  }
  bool fused_reduce = cuda_emu_is_fused_reduce(op);
  bool sums = false;  // a float sum (or product) whose order matters
  if (fused_reduce) {
    const iron_ir_block_t *rb = &op->regions[0].blocks[0];
    sums = cuda_emu_reduce_order_matters(rb->ops[rb->num_ops - 2]);
  }
  if (fused_reduce && !e->multi_thread)
    return IRON_ERR(FAILED_PRECONDITION,
                    "cuda_emu: a fusion ending in a reduce cannot run on "
                    "one emulated thread");
  cuda_emu_params_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  p->fused = op->kind == IRON_OP_FUSION;
  iron_status_t st =
      ck->prepare_on((iron_device_t *)e->fake, op, regions, &p->cuda_params);
  if (st) {
    free(p);
    return st;
  }
  p->cuda_k = ck;
  static const uint32_t kFirst0 = 0;
  if (ck->run == iron_cuda_ew_multi_run) {
    const iron_cuda_ew_multi_params_t *mp = p->cuda_params;
    p->num_parts = mp->num_parts;
    p->parts = mp->parts;
    p->first = mp->first_input;
  } else {
    p->num_parts = 1;
    p->parts = p->cuda_params;
    p->first = &kFirst0;
  }
  p->kernel = calloc(p->num_parts + 1, sizeof(size_t));
  bool fixed_grid = false;
  for (uint32_t k = 0; k < p->num_parts; ++k) {
    const iron_cuda_ew_params_t *ew = &p->parts[k];
    unsigned grid, block;
    iron_cuda_launch_dims((iron_device_t *)e->fake, ew->count, &grid, &block);
    const char *src = cuda_emu_find_source(ew->fn->name);
    const char *body = src ? src + strlen(iron_cuda_prelude()) : NULL;
    fixed_grid = fixed_grid || grid != ew->grid || block != ew->block ||
                 (body && (strstr(body, "__shared__") ||
                           strstr(body, "__syncthreads") ||
                           strstr(body, "threadIdx.y")));
  }
  if ((fixed_grid || fused_reduce || e->all_grid) && e->multi_thread) {
    p->mt = true;
  } else if (fixed_grid && p->fused) {
    // A fusion with tiles (pivot transposes, gen/fusion.c) has no host
    // kernel: it runs on its grid whatever the caller set.
    p->mt = true;
  } else if (fixed_grid) {
    // A launch shape of the generator's own, threads that cooperate
    // (tiled transposes): one emulated thread cannot run it; the host
    // kernel does.
    if (p->fused) {
      cuda_emu_params_destroy(p);
      return IRON_ERR(FAILED_PRECONDITION, "cuda_emu: fusion with a fixed "
                                           "grid");
    }
    return cuda_emu_use_host(p, op, regions, out_params);
  }
  for (uint32_t k = 0; k < p->num_parts; ++k) {
    const char *name = p->parts[k].fn->name;
    p->kernel[k] =
        cuda_emu_kernel_index(name, cuda_emu_find_source(name), p->fused);
    if (p->mt && !e->k[p->kernel[k]].mt) {
      if (p->kernel[k] < e->built_k) {
        cuda_emu_params_destroy(p);
        return IRON_ERR(INTERNAL, "cuda_emu: kernel %s was built for one "
                        "thread", name);
      }
      e->k[p->kernel[k]].mt = true;
    }
    if (!e->k[p->kernel[k]].source) {
      cuda_emu_params_destroy(p);
      return IRON_ERR(INTERNAL, "cuda_emu: no source for kernel %s", name);
    }
    // The split's partials (gen/reduce.c cols_segments, row_segments).
    if (sums && strstr(e->k[p->kernel[k]].source, "iron_part0"))
      e->split_sums++;
  }
  if (p->fused && p->parts[0].num_inputs + p->parts[0].num_outputs >
                      e->max_fused_params)
    e->max_fused_params = p->parts[0].num_inputs + p->parts[0].num_outputs;
  if (op->kind == IRON_OP_DYNAMIC_UPDATE_SLICE) {
    p->dus = true;
    p->dus_full = iron_ir_type_num_elements(op->operands[1]->type) ==
                  iron_ir_type_num_elements(op->operands[0]->type);
    iron_ir_type_byte_size(op->operands[0]->type, &p->dus_bytes);
  }
  *out_params = p;
  return IRON_OK;
}

// The launch of a reduce, gather or scatter (cuda_reduce.c, cuda_gather.c
// do the same on the GPU).
static inline iron_status_t cuda_emu_run_op_launch(
    const cuda_emu_params_t *p, const iron_tensor_t *const *inputs,
    iron_tensor_t *const *outputs) {
  cuda_emu_exec_t *e = &g_cuda_emu;
  const iron_cuda_op_launch_t *l = p->cuda_params;
  for (uint32_t i = 0; p->scatter && i < p->n_out; ++i)
    if (p->op_bytes[i] && outputs[i]->data != inputs[i]->data)
      memmove(outputs[i]->data, inputs[i]->data, p->op_bytes[i]);
  if (l->skip) return IRON_OK;
  const cuda_emu_kernel_t *kk = &e->k[p->kernel[0]];
  if (kk->lib >= e->num_libs)
    return IRON_ERR(INTERNAL, "cuda_emu: kernel %s was not built", kk->name);
  uint32_t n = p->n_in + p->n_out;
  void **ptrs = calloc(2 * (size_t)n + 1, sizeof(void *));
  if (!ptrs) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
  void **args = ptrs + n;
  uint32_t a = 0;
  if (p->scatter) {  // results, then the indices and updates
    for (uint32_t i = 0; i < p->n_out; ++i) ptrs[a++] = outputs[i]->data;
    for (uint32_t i = p->n_out; i < p->n_in; ++i) ptrs[a++] = inputs[i]->data;
  } else {
    for (uint32_t i = 0; i < p->n_in; ++i) ptrs[a++] = inputs[i]->data;
    for (uint32_t i = 0; i < p->n_out; ++i) ptrs[a++] = outputs[i]->data;
  }
  for (uint32_t i = 0; i < a; ++i) args[i] = &ptrs[i];
#if defined(__x86_64__)
  unsigned csr = _mm_getcsr();
  if (e->flush) _mm_setcsr(csr | 0x8040u);
#endif
  int r = cuda_emu_launch(&e->libs[kk->lib], kk->name, l->grid, l->block,
                          args);
#if defined(__x86_64__)
  _mm_setcsr(csr);
#endif
  free(ptrs);
  if (r)
    return IRON_ERR(INTERNAL, "cuda_emu: launch of %s (%u x %u) failed",
                    kk->name, l->grid, l->block);
  __atomic_add_fetch(&e->launches, 1, __ATOMIC_RELAXED);
  __atomic_add_fetch(&e->mt_launches, 1, __ATOMIC_RELAXED);
  return IRON_OK;
}

static inline iron_status_t cuda_emu_run(const iron_kernel_ctx_t *ctx,
                                  const void *params,
                                  const iron_tensor_t *const *inputs,
                                  iron_tensor_t *const *outputs) {
  const cuda_emu_params_t *p = params;
  if (p->host_k) return p->host_k->run(ctx, p->host_params, inputs, outputs);
  cuda_emu_exec_t *e = &g_cuda_emu;
  if (p->op_launch) return cuda_emu_run_op_launch(p, inputs, outputs);
  const iron_cuda_ew_params_t *ew = &p->parts[0];
  // What iron_cuda_ew_run and the dynamic_update_slice kernel do before
  // their launch: a root's output starts as its operand.
  if (p->dus) {
    const void *src = p->dus_full ? inputs[1]->data : inputs[0]->data;
    for (uint32_t k = 1; k < ew->num_inputs && !p->dus_full; ++k)
      if (p->dus_bytes && outputs[0]->data == inputs[k]->data)
        return IRON_ERR(INTERNAL, "dynamic_update_slice: result shares "
                                  "input %u's storage", k);
    if (outputs[0]->data != src && p->dus_bytes)
      memmove(outputs[0]->data, src, p->dus_bytes);
  }
  for (uint32_t k = 0; k < ew->num_dus; ++k) {
    void *dst = outputs[ew->dus_out[k]]->data;
    const void *src = inputs[ew->dus_in[k]]->data;
    if (dst == src || ew->dus_bytes[k] == 0) continue;
    for (uint32_t i = 0; i < ew->num_inputs; ++i)
      if (inputs[i]->data == dst)
        return IRON_ERR(INTERNAL, "CUDA fusion: output %u shares input %u's "
                        "storage", ew->dus_out[k], i);
    memcpy(dst, src, ew->dus_bytes[k]);
  }
  for (uint32_t part = 0; part < p->num_parts; ++part) {
    ew = &p->parts[part];
    const cuda_emu_kernel_t *kk = &e->k[p->kernel[part]];
    void (*call)(void *const *) = kk->call;
    if (!call && !kk->mt)
      return IRON_ERR(INTERNAL, "cuda_emu: kernel %s was not built",
                      kk->name);
    if (ew->count == 0) continue;
    if (kk->mt) {
      // As iron_cuda_ew_run: pointers to the pointer parameters.
      uint32_t n = ew->num_inputs + ew->num_outputs;
      void **ptrs = calloc(2 * (size_t)n + 1, sizeof(void *));
      if (!ptrs) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
      void **args = ptrs + n;
      for (uint32_t i = 0; i < ew->num_inputs; ++i)
        ptrs[i] = inputs[p->first[part] + i]->data;
      for (uint32_t j = 0; j < ew->num_outputs; ++j)
        ptrs[ew->num_inputs + j] = outputs[j]->data;
      for (uint32_t i = 0; i < n; ++i) args[i] = &ptrs[i];
      if (kk->lib >= e->num_libs) {
        free(ptrs);
        return IRON_ERR(INTERNAL, "cuda_emu: kernel %s was not built",
                        kk->name);
      }
#if defined(__x86_64__)
      unsigned csr = _mm_getcsr();
      if (e->flush) _mm_setcsr(csr | 0x8040u);
#endif
      int r = cuda_emu_launch(&e->libs[kk->lib], kk->name, ew->grid,
                              ew->block, args);
#if defined(__x86_64__)
      _mm_setcsr(csr);
#endif
      free(ptrs);
      if (r)
        return IRON_ERR(INTERNAL, "cuda_emu: launch of %s (%u x %u) failed",
                        kk->name, ew->grid, ew->block);
      __atomic_add_fetch(&e->launches, 1, __ATOMIC_RELAXED);
      __atomic_add_fetch(&e->mt_launches, 1, __ATOMIC_RELAXED);
      if (p->row) {
        __atomic_add_fetch(&e->row_launches, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&e->fused_launches, 1, __ATOMIC_RELAXED);
      }
      continue;
    }
    uint32_t n = ew->num_inputs + ew->num_outputs;
    void **args = calloc(n + 1, sizeof(void *));
    if (!args) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory");
    for (uint32_t i = 0; i < ew->num_inputs; ++i)
      args[i] = inputs[p->first[part] + i]->data;
    for (uint32_t j = 0; j < ew->num_outputs; ++j)
      args[ew->num_inputs + j] = outputs[j]->data;
#if defined(__x86_64__)
    unsigned csr = _mm_getcsr();
    if (e->flush) _mm_setcsr(csr | 0x8040u);  // FTZ and DAZ, as -ftz
#endif
    call(args);
#if defined(__x86_64__)
    _mm_setcsr(csr);
#endif
    free(args);
    __atomic_add_fetch(&e->launches, 1, __ATOMIC_RELAXED);
  }
  if (p->fused) __atomic_add_fetch(&e->fused_launches, 1, __ATOMIC_RELAXED);
  return IRON_OK;
}

static inline const iron_kernel_t *cuda_emu_lookup(iron_op_kind_t kind) {
  if ((int)kind < 0 || kind >= IRON_OP_COUNT) return NULL;
  if (g_cuda_emu.emulated[kind]) return &g_cuda_emu.kernels[kind];
  return iron_reference_kernel_lookup(kind);
}

// Sets up the fake device and the kernel table. Kernels emulated: those of
// cuda_elementwise.c, cuda_shape.c (but reshape, a copy), fusions, and the
// reduce, gather and scatter kernels (on the multi-thread shim when the
// caller sets multi_thread, else the host's kernels run those).
static inline void cuda_emu_exec_init(void) {
  cuda_emu_exec_t *e = &g_cuda_emu;
  if (e->fake) return;
  e->fake = calloc(1, sizeof(*e->fake));
  snprintf(e->fake->arch, sizeof(e->fake->arch), "sm_90a");
  e->fake->num_sms = 132;
  const char *ag = getenv("IRON_TEST_EMU_ALL_GRID");
  e->all_grid = ag && ag[0] == '1';
  iron_cuda_register_elementwise(e->cuda);
  iron_cuda_register_shape(e->cuda);
  iron_cuda_register_reduce(e->cuda);
  iron_cuda_register_gather(e->cuda);
  e->cuda[IRON_OP_FUSION] = &iron_cuda_fusion_kernel;
  for (int k = 0; k < IRON_OP_COUNT; ++k) {
    const iron_kernel_t *ck = e->cuda[k];
    if (!ck || !ck->prepare_on) continue;
    bool ok = ck->run == iron_cuda_ew_run ||
              ck->run == iron_cuda_ew_multi_run || k == IRON_OP_FUSION ||
              k == IRON_OP_DYNAMIC_UPDATE_SLICE || k == IRON_OP_REDUCE ||
              k == IRON_OP_GATHER || k == IRON_OP_SCATTER;
    if (!ok) continue;
    e->emulated[k] = true;
    e->kernels[k] = (iron_kernel_t){
        .name = ck->name,
        .run = cuda_emu_run,
        .destroy = cuda_emu_params_destroy,
        .inplace_ok = ck->inplace_ok,
        .elementwise = false,
        .prepare_on = cuda_emu_prepare,
    };
  }
  e->flush = iron_cuda_flush_denormals();
}

// The emulated device's destroy: the host's, then one live device less.
static inline void cuda_emu_device_destroy(iron_device_t *dev) {
  g_cuda_emu.host_destroy(dev);
  atomic_fetch_sub(&g_cuda_emu.live_devices, 1);
}

// A runtime (on the host device) that plans and runs as described above.
// Release it with iron_runtime_release.
static inline iron_status_t cuda_emu_exec_runtime(iron_runtime_t **out_rt) {
  cuda_emu_exec_init();
  IRON_RETURN_IF_ERROR_PLAIN(iron_runtime_create(NULL, out_rt));
  iron_device_t *dev = iron_runtime_device(*out_rt, 0);
  if (strcmp(dev->vtable->kind, "host") != 0)
    return IRON_ERR(FAILED_PRECONDITION, "cuda_emu: needs IRON_DEVICE=host");
  g_cuda_emu.vtable = *dev->vtable;
  g_cuda_emu.vtable.kernel_lookup = cuda_emu_lookup;
  g_cuda_emu.vtable.fusable = iron_cuda_fusable;
  g_cuda_emu.vtable.row_fusable = iron_cuda_row_fusable;
  g_cuda_emu.vtable.pivot_fusable = iron_cuda_pivot_fusable;
  // The CUDA device's passes, all of them: a dot with a vector side over a
  // slice becomes a fused reduction there (the decode step's attention
  // over a scanned cache), and its kernels must be emulated too.
  g_cuda_emu.vtable.vector_dot = iron_cuda_vector_dot;
  // A module the scan rewrite breaks fails here instead of compiling
  // again as written (executable.c): the emulation is where that shows.
  setenv("IRON_SCAN_IN_PLACE", "1", 0);
  g_cuda_emu.host_destroy = dev->vtable->destroy;
  g_cuda_emu.vtable.destroy = cuda_emu_device_destroy;
  atomic_fetch_add(&g_cuda_emu.live_devices, 1);
  dev->vtable = &g_cuda_emu.vtable;
  return IRON_OK;
}

// Compiles the kernels requested since the last build (one C++ program)
// and binds them. False when the C++ compile fails.
static inline bool cuda_emu_exec_build(void) {
  cuda_emu_exec_t *e = &g_cuda_emu;
  size_t first = e->built_k, n = e->num_k - first;
  if (n == 0) return true;
  bool ok = true;
  // Two libraries: one-thread kernels (called directly) and multi-thread
  // ones (launched on their grid).
  for (int mt = 0; mt < 2 && ok; ++mt) {
    char **srcs = calloc(n, sizeof(char *));
    size_t *which = calloc(n, sizeof(size_t));
    int m = 0;
    for (size_t i = 0; i < n; ++i) {
      const cuda_emu_kernel_t *k = &e->k[first + i];
      if (k->mt != (mt == 1)) continue;
      size_t len = strlen(k->source) + 2 * strlen(k->name) + 128;
      srcs[m] = malloc(len);
      if (mt)
        snprintf(srcs[m], len, "%s", k->source);
      else
        snprintf(srcs[m], len,
                 "%s\nextern \"C\" void emuw_%s(void *const *a) { "
                 "iron_emu_call(%s, a); }\n",
                 k->source, k->name, k->name);
      which[m++] = first + i;
    }
    if (m > 0) {
      e->libs = realloc(e->libs, (e->num_libs + 1) * sizeof(*e->libs));
      cuda_emu_lib_t *lib = &e->libs[e->num_libs++];
      ok = mt ? cuda_emu_build_mt((const char *const *)srcs, m,
                                  iron_cuda_prelude(), lib)
              : cuda_emu_build((const char *const *)srcs, m,
                               iron_cuda_prelude(), lib);
      for (int i = 0; i < m && ok; ++i) {
        cuda_emu_kernel_t *k = &e->k[which[i]];
        k->lib = e->num_libs - 1;
        if (mt) continue;  // cuda_emu_launch finds it by name
        char sym[200];
        snprintf(sym, sizeof(sym), "emuw_%s", k->name);
        void *f = cuda_emu_sym(lib, sym);
        if (!f) {
          fprintf(stderr, "cuda_emu: %s not found\n", sym);
          ok = false;
        }
        memcpy(&k->call, &f, sizeof(f));
      }
    }
    for (int i = 0; i < m; ++i) free(srcs[i]);
    free(srcs);
    free(which);
  }
  e->built_k = e->num_k;
  return ok;
}

static inline void cuda_emu_exec_shutdown(void) {
  cuda_emu_exec_t *e = &g_cuda_emu;
  // Devices whose runtime a job still holds (released by the test, its
  // last reference dropped on the device's worker): wait for their
  // destroy, at most 30 s (a leaked runtime is the test's bug: reported).
  for (int i = 0; i < 30000 && atomic_load(&e->live_devices) > 0; ++i) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  if (atomic_load(&e->live_devices) > 0)
    fprintf(stderr, "cuda_emu: %d emulated devices never destroyed\n",
            atomic_load(&e->live_devices));
  for (size_t i = 0; i < e->num_libs; ++i) cuda_emu_close(&e->libs[i]);
  free(e->libs);
  for (size_t i = 0; i < e->num_k; ++i) {
    free(e->k[i].name);
    free(e->k[i].source);
  }
  free(e->k);
  if (e->fake) {
    iron_cuda_compiler_destroy(e->fake->compiler);
    free(e->fake);
  }
  memset(e, 0, sizeof(*e));
}

// ---------------------------------------------------------------------------
// Inputs, runs and bit-for-bit comparison (shared by the tests that run
// programs both ways).

#include "base/half.h"

static inline uint64_t cuda_emu_mix(uint64_t x) {  // splitmix64
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Deterministic inputs for seed `seed` (> 0; seed 0 is the caller's
// test_fill_synthetic): floats in [-4, 4] in steps of 1/16, signed
// integers in [-9, 12], unsigned in [0, 20], and scalar integers (start
// indices, loop bounds) also far out of range: -1000 and 1000. Even seeds
// make about 1 in 8 f32/bf16/f64 elements a denormal (of
// either sign): the GPU keeps a denormal wherever generated code forgets
// to flush it (a select, f64 arithmetic), XLA:CPU and the host read and
// write them as zero.
static inline void cuda_emu_fill(void *data, iron_dtype_t dt, int32_t rank,
                          int64_t count, uint64_t seed, uint32_t arg) {
  static const int64_t kScalars[] = {-1000, -3, -1, 0, 1, 2, 3, 5, 8, 1000};
  for (int64_t i = 0; i < count; ++i) {
    uint64_t r = cuda_emu_mix(seed * 0x100000001ull + arg * 7919u + (uint64_t)i);
    double f = (double)((int64_t)(r % 129) - 64) / 16.0;
    if (seed % 2 == 0 && (r >> 40) % 8 == 0)
      f = ldexp(f, dt == IRON_DTYPE_F64 ? -1030 : -130);
    int64_t si = rank == 0 ? kScalars[r % 10] : (int64_t)(r % 22) - 9;
    // Unsigned scalars: 0 for the negative ones, or every bit set (past
    // INT64_MAX for u64).
    uint64_t ui = rank != 0 ? r % 21
                  : kScalars[r % 10] == -1000 ? ~0ull
                  : kScalars[r % 10] < 0     ? 0
                                             : (uint64_t)kScalars[r % 10];
    switch (dt) {
      case IRON_DTYPE_F32: ((float *)data)[i] = (float)f; break;
      case IRON_DTYPE_F64: ((double *)data)[i] = f; break;
      case IRON_DTYPE_F16: ((uint16_t *)data)[i] = iron_f32_to_f16((float)f); break;
      case IRON_DTYPE_BF16: ((uint16_t *)data)[i] = iron_f32_to_bf16((float)f); break;
      case IRON_DTYPE_C64:
        ((float *)data)[2 * i] = (float)f;
        ((float *)data)[2 * i + 1] = (float)((int64_t)((r >> 20) % 65) - 32) / 8.0f;
        break;
      case IRON_DTYPE_C128:
        ((double *)data)[2 * i] = f;
        ((double *)data)[2 * i + 1] = (double)((int64_t)((r >> 20) % 65) - 32) / 8.0;
        break;
      case IRON_DTYPE_S8: ((int8_t *)data)[i] = (int8_t)si; break;
      case IRON_DTYPE_S16: ((int16_t *)data)[i] = (int16_t)si; break;
      case IRON_DTYPE_S32: ((int32_t *)data)[i] = (int32_t)si; break;
      case IRON_DTYPE_S64: ((int64_t *)data)[i] = si; break;
      case IRON_DTYPE_U8: ((uint8_t *)data)[i] = (uint8_t)ui; break;
      case IRON_DTYPE_U16: ((uint16_t *)data)[i] = (uint16_t)ui; break;
      case IRON_DTYPE_U32: ((uint32_t *)data)[i] = (uint32_t)ui; break;
      case IRON_DTYPE_U64: ((uint64_t *)data)[i] = ui; break;
      // Now and then a byte other than 0/1 (numpy bytes viewed as bool,
      // a bitcast): every device reads the byte as it is.
      case IRON_DTYPE_PRED:
        ((uint8_t *)data)[i] = (uint8_t)((r & 1) | ((r >> 8) % 8 == 0 ? 0x60 : 0));
        break;
      // Sub-byte integers: the low bits of a byte, as numpy/ml_dtypes
      // store them (-1 in s4 is 0x0f).
      case IRON_DTYPE_S4: case IRON_DTYPE_U4:
        ((uint8_t *)data)[i] = (uint8_t)(r % 16);
        break;
      case IRON_DTYPE_S2: case IRON_DTYPE_U2:
        ((uint8_t *)data)[i] = (uint8_t)(r % 4);
        break;
      default: {  // f8 / f4 / f6 families: any byte pattern of the low bits
        size_t es = iron_dtype_size(dt);
        int bits = iron_dtype_bits(dt);
        uint64_t v = bits >= 64 ? r : (r & ((1ull << bits) - 1));
        memcpy((char *)data + (size_t)i * es, &v, es < 8 ? es : 8);
      }
    }
  }
}

// The value of a real float element (f32, f64, f16, bf16) at p as a
// double; false for other dtypes.
static inline bool cuda_emu_elem_float(iron_dtype_t dt, const uint8_t *p,
                                       double *out) {
  switch (dt) {
    case IRON_DTYPE_F32: {
      float v;
      memcpy(&v, p, 4);
      *out = v;
      return true;
    }
    case IRON_DTYPE_F64: memcpy(out, p, 8); return true;
    case IRON_DTYPE_F16: {
      uint16_t h;
      memcpy(&h, p, 2);
      *out = iron_f16_to_f32(h);
      return true;
    }
    case IRON_DTYPE_BF16: {
      uint16_t h;
      memcpy(&h, p, 2);
      *out = iron_bf16_to_f32(h);
      return true;
    }
    default: return false;
  }
}

// Whether two elements of dtype dt are the same: equal bits, or both NaN
// (payloads and signs of NaN are not compared).
static inline bool cuda_emu_same(iron_dtype_t dt, const uint8_t *a, const uint8_t *b) {
  size_t es = iron_dtype_size(dt);
  if (memcmp(a, b, es) == 0) return true;
  switch (dt) {
    case IRON_DTYPE_F32: {
      float x, y;
      memcpy(&x, a, 4);
      memcpy(&y, b, 4);
      return x != x && y != y;
    }
    case IRON_DTYPE_F64: {
      double x, y;
      memcpy(&x, a, 8);
      memcpy(&y, b, 8);
      return x != x && y != y;
    }
    case IRON_DTYPE_F16: {
      uint16_t x, y;
      memcpy(&x, a, 2);
      memcpy(&y, b, 2);
      return (x & 0x7fff) > 0x7c00 && (y & 0x7fff) > 0x7c00;
    }
    case IRON_DTYPE_BF16: {
      uint16_t x, y;
      memcpy(&x, a, 2);
      memcpy(&y, b, 2);
      return (x & 0x7fff) > 0x7f80 && (y & 0x7fff) > 0x7f80;
    }
    case IRON_DTYPE_C64:
      return cuda_emu_same(IRON_DTYPE_F32, a, b) &&
             cuda_emu_same(IRON_DTYPE_F32, a + 4, b + 4);
    case IRON_DTYPE_C128:
      return cuda_emu_same(IRON_DTYPE_F64, a, b) &&
             cuda_emu_same(IRON_DTYPE_F64, a + 8, b + 8);
    case IRON_DTYPE_F8E8M0FNU:
      return a[0] == 0xff && b[0] == 0xff;
    default: {
      // The f8 family: NaN is every all-ones exponent with a nonzero
      // mantissa (IEEE-like), the all-ones magnitude (FN) or -0 (FNUZ).
      int eb, mb, bias, kind;
      if (!iron_cuda_nf_format(dt, &eb, &mb, &bias, &kind)) return false;
      unsigned mag_mask = (1u << (eb + mb)) - 1u;
      unsigned sign = 1u << (eb + mb), mmask = (1u << mb) - 1u;
      bool nan[2];
      for (int k = 0; k < 2; ++k) {
        unsigned v = k ? b[0] : a[0];
        unsigned mag = v & mag_mask;
        nan[k] = kind == 0   ? ((mag >> mb) == (mag_mask >> mb) && (mag & mmask))
                 : kind == 1 ? mag == mag_mask
                 : kind == 2 ? v == sign
                             : false;
      }
      return nan[0] && nan[1];
    }
  }
}

// Runs `exe` on `dev` with inputs of seed `seed` (0: test_fill_synthetic
// when `fill0` is given); *out_results (malloc'ed byte arrays, one per
// output) on success.
typedef void (*cuda_emu_fill0_fn)(void *data, iron_dtype_t dt, int64_t count);
// An input filler: `count` elements of input `arg` (rank `rank`) for seed
// `seed` (cuda_emu_fill's contract).
typedef void (*cuda_emu_fill_fn)(void *data, iron_dtype_t dt, int32_t rank,
                                 int64_t count, uint64_t seed, uint32_t arg);
static inline iron_status_t cuda_emu_run_program_with(
    iron_executable_t *exe, iron_device_t *dev, uint64_t seed,
    cuda_emu_fill0_fn fill0, cuda_emu_fill_fn fill, uint8_t ***out_results);
static inline iron_status_t cuda_emu_run_program(iron_executable_t *exe,
                                          iron_device_t *dev, uint64_t seed,
                                          cuda_emu_fill0_fn fill0,
                                          uint8_t ***out_results) {
  return cuda_emu_run_program_with(exe, dev, seed, fill0, cuda_emu_fill,
                                   out_results);
}
// As cuda_emu_run_program, with inputs of seeds > 0 (or of seed 0 without
// fill0) from `fill`.
static inline iron_status_t cuda_emu_run_program_with(
    iron_executable_t *exe, iron_device_t *dev, uint64_t seed,
    cuda_emu_fill0_fn fill0, cuda_emu_fill_fn fill, uint8_t ***out_results) {
  uint32_t ni = iron_executable_num_inputs(exe);
  uint32_t no = iron_executable_num_outputs(exe);
  iron_buffer_t **args = calloc(ni + 1, sizeof(*args));
  iron_buffer_t **outs = calloc(no + 1, sizeof(*outs));
  uint8_t **res = calloc(no + 1, sizeof(*res));
  iron_status_t st = IRON_OK;
  for (uint32_t i = 0; i < ni && !st; ++i) {
    iron_dtype_t dt;
    int32_t rank;
    const int64_t *dims;
    iron_executable_input_type(exe, i, &dt, &rank, &dims);
    int64_t count = 1;
    for (int32_t k = 0; k < rank; ++k) count *= dims[k];
    size_t es = iron_dtype_size(dt);
    void *data = calloc((size_t)count + 1, es ? es : 1);
    if (seed == 0 && fill0)
      fill0(data, dt, count);
    else
      fill(data, dt, rank, count, seed, i);
    st = iron_buffer_create_from_host(dev, dt, rank, dims, data, NULL,
                                      &args[i]);
    free(data);
  }
  if (!st) {
    iron_event_t *done = NULL;
    st = iron_executable_execute(exe, args, ni, NULL, outs, &done);
    if (!st) {
      st = iron_event_wait(done);
      iron_event_release(done);
    }
  }
  for (uint32_t j = 0; j < no && !st; ++j) {
    size_t nb = iron_buffer_size_in_bytes(outs[j]);
    res[j] = malloc(nb + 1);
    iron_event_t *done = NULL;
    st = iron_buffer_to_host(outs[j], res[j], nb, &done);
    if (!st) {
      st = iron_event_wait(done);
      iron_event_release(done);
    }
  }
  for (uint32_t j = 0; j < no; ++j)
    if (outs[j]) iron_buffer_release(outs[j]);
  for (uint32_t i = 0; i < ni; ++i)
    if (args[i]) iron_buffer_release(args[i]);
  free(args);
  free(outs);
  if (st) {
    for (uint32_t j = 0; j < no; ++j) free(res[j]);
    free(res);
    return st;
  }
  *out_results = res;
  return IRON_OK;
}

static inline void cuda_emu_free_results(uint8_t **res, uint32_t n) {
  if (!res) return;
  for (uint32_t j = 0; j < n; ++j) free(res[j]);
  free(res);
}

static inline double cuda_emu_float_at(iron_dtype_t dt, const uint8_t *p,
                                       int part);

// Whether element `w` and `g` of an output of dtype dt agree within rtol
// times `scale` (its largest host magnitude): float parts close, f16/bf16
// one unit in the last place apart (an f32 sum reordered rounds either
// way); other dtypes never (the caller compared them exactly).
static inline bool cuda_emu_near(iron_dtype_t dt, const uint8_t *w,
                                  const uint8_t *g, double rtol, double scale) {
  int parts = dt == IRON_DTYPE_C64 || dt == IRON_DTYPE_C128 ? 2 : 1;
  if (dt == IRON_DTYPE_F16 || dt == IRON_DTYPE_BF16) {
    uint16_t a, b;
    memcpy(&a, w, 2);
    memcpy(&b, g, 2);
    if ((a & 0x8000) == (b & 0x8000) && (a > b ? a - b : b - a) <= 1)
      return true;
  } else if (dt != IRON_DTYPE_F32 && dt != IRON_DTYPE_F64 && parts == 1) {
    return false;
  }
  for (int q = 0; q < parts; ++q) {
    double x = cuda_emu_float_at(dt, w, q), y = cuda_emu_float_at(dt, g, q);
    if (!((x != x && y != y) || x == y || fabs(x - y) <= rtol * scale))
      return false;
  }
  return true;
}

// Compares every output bit for bit (NaN payloads aside) or, with rtol >=
// 0, float outputs within rtol of each output's largest host magnitude (a
// sum in another order: cancellation makes single elements' relative
// errors meaningless; cuda_emu_near); prints each differing output.
// Returns the differing elements.
static inline int64_t cuda_emu_compare_within(const iron_executable_t *exe,
                                              uint8_t *const *want,
                                              uint8_t *const *got,
                                              const char *what, double rtol) {
  int64_t bad = 0;
  uint32_t no = iron_executable_num_outputs(exe);
  for (uint32_t j = 0; j < no; ++j) {
    iron_dtype_t dt;
    int32_t rank;
    const int64_t *dims;
    iron_executable_output_type(exe, j, &dt, &rank, &dims);
    int64_t count = 1;
    for (int32_t k = 0; k < rank; ++k) count *= dims[k];
    size_t es = iron_dtype_size(dt);
    int parts = dt == IRON_DTYPE_C64 || dt == IRON_DTYPE_C128 ? 2 : 1;
    double scale = 0;
    for (int64_t i = 0; rtol >= 0 && i < count; ++i)
      for (int q = 0; q < parts; ++q) {
        double w = cuda_emu_float_at(dt, want[j] + (size_t)i * es, q);
        if (w == w && fabs(w) > scale && !isinf(w)) scale = fabs(w);
      }
    int64_t first = -1, nbad = 0;
    // IRON_TEST_SHOW_DIFFS=N prints the first N differing elements.
    const char *show_env = getenv("IRON_TEST_SHOW_DIFFS");
    int64_t show = show_env ? atoll(show_env) : 0;
    for (int64_t i = 0; i < count; ++i) {
      const uint8_t *w8 = want[j] + (size_t)i * es, *g8 = got[j] + (size_t)i * es;
      if (cuda_emu_same(dt, w8, g8) ||
          (rtol >= 0 && cuda_emu_near(dt, w8, g8, rtol, scale)))
        continue;
      if (first < 0) first = i;
      if (nbad < show) {
        uint64_t w = 0, g = 0;
        memcpy(&w, w8, es < 8 ? es : 8);
        memcpy(&g, g8, es < 8 ? es : 8);
        fprintf(stderr, "  output %u element %lld: host 0x%llx, CUDA 0x%llx\n",
                j, (long long)i, (unsigned long long)w, (unsigned long long)g);
      }
      nbad++;
    }
    if (nbad) {
      uint64_t w = 0, g = 0;
      memcpy(&w, want[j] + (size_t)first * es, es < 8 ? es : 8);
      memcpy(&g, got[j] + (size_t)first * es, es < 8 ? es : 8);
      char how[64] = "differ";
      if (rtol >= 0)
        snprintf(how, sizeof(how), "beyond %g of the largest magnitude", rtol);
      fprintf(stderr,
              "%s: output %u (%s, %lld elements): %lld %s; first at "
              "%lld: host 0x%llx, CUDA emulation 0x%llx\n",
              what, j, iron_dtype_name(dt), (long long)count, (long long)nbad,
              how, (long long)first, (unsigned long long)w,
              (unsigned long long)g);
    }
    bad += nbad;
  }
  return bad;
}

// Compares every output of `want` (host) and `got` (emulated CUDA) bit for
// bit; prints the first difference of each differing output under `what`.
// Returns the number of differing elements.
static inline int64_t cuda_emu_compare(const iron_executable_t *exe,
                                       uint8_t *const *want,
                                       uint8_t *const *got, const char *what) {
  return cuda_emu_compare_within(exe, want, got, what, -1);
}

// Element q of a float (or complex part q) as a double.
static inline double cuda_emu_float_at(iron_dtype_t dt, const uint8_t *p,
                                       int part) {
  switch (dt) {
    case IRON_DTYPE_F32: case IRON_DTYPE_C64: {
      float x;
      memcpy(&x, p + 4 * part, 4);
      return x;
    }
    case IRON_DTYPE_F64: case IRON_DTYPE_C128: {
      double x;
      memcpy(&x, p + 8 * part, 8);
      return x;
    }
    case IRON_DTYPE_F16: {
      uint16_t h;
      memcpy(&h, p, 2);
      return iron_f16_to_f32(h);
    }
    case IRON_DTYPE_BF16: {
      uint16_t h;
      memcpy(&h, p, 2);
      return iron_bf16_to_f32(h);
    }
    default:
      return 0;
  }
}

// ---------------------------------------------------------------------------
// Batches: modules compiled both ways now, built and run later.

#include "runtime/executable.h"

typedef struct cuda_emu_prog {
  char what[160];
  iron_executable_t *ref, *emu;
} cuda_emu_prog_t;

typedef struct cuda_emu_batch {
  iron_runtime_t *rt_ref, *rt_emu;
  cuda_emu_prog_t *progs;
  size_t num, cap;
  int host_refused, cuda_refused;  // compile refusals (UNIMPLEMENTED)
  int runs, differ, failed;
  bool verbose;
} cuda_emu_batch_t;

static inline bool cuda_emu_batch_init(cuda_emu_batch_t *b) {
  memset(b, 0, sizeof(*b));
  setenv("IRON_DEVICE", "host", 1);
  setenv("IRON_HOST_LIBM_EXP", "1", 1);
  b->verbose = getenv("IRON_TEST_VERBOSE") != NULL;
  if (!cuda_emu_have_cxx()) return false;
  iron_status_t st = iron_runtime_create(NULL, &b->rt_ref);
  if (!st) st = cuda_emu_exec_runtime(&b->rt_emu);
  if (st) {
    fprintf(stderr, "cuda_emu: %s\n", iron_status_message(st));
    iron_status_free(st);
    return false;
  }
  return true;
}

// Compiles `m_ref` on the host and `m_emu` (the same program, built again:
// compiling consumes a module) as CUDA. A refusal by the host skips the
// program; by CUDA it is returned (UNIMPLEMENTED is counted, the caller
// decides whether it may happen) and the program skipped.
static inline iron_status_t cuda_emu_batch_add(cuda_emu_batch_t *b,
                                        iron_ir_module_t *m_ref,
                                        iron_ir_module_t *m_emu,
                                        const char *what) {
  if (b->num == b->cap) {
    b->cap = b->cap ? 2 * b->cap : 64;
    b->progs = realloc(b->progs, b->cap * sizeof(*b->progs));
  }
  cuda_emu_prog_t *p = &b->progs[b->num];
  memset(p, 0, sizeof(*p));
  snprintf(p->what, sizeof(p->what), "%s", what);
  iron_status_t st =
      iron_executable_compile_module(b->rt_ref, m_ref, NULL, 0, NULL, &p->ref);
  if (st) {
    if (b->verbose) fprintf(stderr, "%s: host: %s\n", what,
                            iron_status_message(st));
    b->host_refused++;
    iron_status_free(st);
    iron_ir_module_destroy(m_emu);
    return IRON_OK;
  }
  st = iron_executable_compile_module(b->rt_emu, m_emu, NULL, 0, NULL, &p->emu);
  if (st) {
    if (iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED) b->cuda_refused++;
    iron_executable_release(p->ref);
    return st;
  }
  b->num++;
  return IRON_OK;
}

// Builds the kernels and runs every program on seeds 1..num_seeds both
// ways; differences and failures are printed and counted.
static inline bool cuda_emu_batch_run(cuda_emu_batch_t *b, int num_seeds) {
  if (!cuda_emu_exec_build()) return false;
  for (size_t i = 0; i < b->num; ++i) {
    cuda_emu_prog_t *p = &b->progs[i];
    uint32_t no = iron_executable_num_outputs(p->ref);
    for (uint64_t seed = 1; seed <= (uint64_t)num_seeds; ++seed) {
      uint8_t **want = NULL, **got = NULL;
      iron_status_t sr = cuda_emu_run_program(
          p->ref, iron_runtime_device(b->rt_ref, 0), seed, NULL, &want);
      iron_status_t se = cuda_emu_run_program(
          p->emu, iron_runtime_device(b->rt_emu, 0), seed, NULL, &got);
      if (sr || se) {
        fprintf(stderr, "%s seed %llu: host: %s; CUDA emulation: %s\n",
                p->what, (unsigned long long)seed,
                sr ? iron_status_message(sr) : "ok",
                se ? iron_status_message(se) : "ok");
        b->failed++;
      } else {
        char what[200];
        snprintf(what, sizeof(what), "%s seed %llu", p->what,
                 (unsigned long long)seed);
        if (cuda_emu_compare(p->ref, want, got, what)) b->differ++;
        b->runs++;
      }
      iron_status_free(sr);
      iron_status_free(se);
      cuda_emu_free_results(want, no);
      cuda_emu_free_results(got, no);
    }
  }
  return true;
}

static inline void cuda_emu_batch_destroy(cuda_emu_batch_t *b) {
  for (size_t i = 0; i < b->num; ++i) {
    iron_executable_release(b->progs[i].ref);
    iron_executable_release(b->progs[i].emu);
  }
  free(b->progs);
  if (b->rt_ref) iron_runtime_release(b->rt_ref);
  if (b->rt_emu) iron_runtime_release(b->rt_emu);
  memset(b, 0, sizeof(*b));
  cuda_emu_exec_shutdown();
}

#endif  // IRON_TESTS_CUDA_EMU_EXEC_H_
