// dynamic_slice / dynamic_update_slice on the CUDA device, GPU-free, as
// classes of programs: every dtype (bool, integers, f16/bf16, f32/f64,
// complex, sub-byte and f8), ranks 0 to 4 with size-1 and odd dims,
// start indices traced (seeds put them in range, negative and far out of
// range) or constant, of every index dtype, in the forms fuse.c groups:
//   ds_ew       dynamic_slice read by an element-wise op (an indexed load)
//   ds_unit     x[i]: dynamic_slice to [1, ...] then a reshape dropping the 1
//   dus_ew      dynamic_update_slice of a computed update (a fused root)
//   dus_bcast   ... of a broadcast scalar (issue 12's "3 elements in a
//               fusion of 1 elements")
//   dus_reshape ... of an update computed in another shape and reshaped
//               (a KV-cache write of this token's keys)
//   dus_unit    ... through a broadcast_in_dim adding a unit dim (a scan's
//               stacked outputs)
//   ds_dus      a window read, changed and written back into the operand
//   two_roots   one update written into two operands, and returned
//   unfused     dynamic_slice and dynamic_update_slice of inputs alone
//   ds_scalar   one element read at a start (x[i] of a vector) and
//               broadcast into a computation of another shape
// Start indices are traced arguments, constants, or computed from the
// arguments the way jax normalizes negative indices (i < 0 ? i + n : i),
// which fuse.c computes inside the kernel that uses them.
// Each program is built with the IR builder, run on the host device and as
// the CUDA device plans it (cuda_emu_exec.h: CUDA fusion, the generated
// kernels run on the CPU), on three seeds, and the results must match bit
// for bit. Every generated kernel text (up to numbers) is also compiled by
// NVRTC for sm_90a when NVRTC is present.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_emu_exec.h"
#include "cuda_test_nvrtc.h"
#include "ir/builder.h"
#include "runtime/executable.h"
#include "test.h"

enum {
  FAM_DS_EW,
  FAM_DS_UNIT,
  FAM_DUS_EW,
  FAM_DUS_BCAST,
  FAM_DUS_RESHAPE,
  FAM_DUS_UNIT,
  FAM_DS_DUS,
  FAM_TWO_ROOTS,
  FAM_UNFUSED,
  FAM_DS_SCALAR,
  NUM_FAMS
};
static const char *const kFamNames[NUM_FAMS] = {
    "ds_ew",       "ds_unit",  "dus_ew", "dus_bcast", "dus_reshape",
    "dus_unit",    "ds_dus",   "two_roots", "unfused", "ds_scalar"};

// Operand and update (window) shapes.
typedef struct shape {
  int32_t rank;
  int64_t x[4], u[4];
} shape_t;
static const shape_t kShapes[] = {
    {0, {0}, {0}},
    {1, {10}, {3}},
    {2, {5, 7}, {2, 3}},
    {3, {4, 1, 6}, {4, 1, 3}},
    {4, {3, 5, 2, 4}, {1, 2, 2, 3}},
    {2, {1, 9}, {1, 4}},
    {2, {7, 1}, {3, 1}},
    {2, {300, 33}, {257, 31}},  // past one 256-thread block
};
#define NUM_SHAPES (int)(sizeof(kShapes) / sizeof(kShapes[0]))

static const iron_dtype_t kDtypes[] = {
    IRON_DTYPE_PRED,       IRON_DTYPE_S8,         IRON_DTYPE_S16,
    IRON_DTYPE_S32,        IRON_DTYPE_S64,        IRON_DTYPE_U8,
    IRON_DTYPE_U16,        IRON_DTYPE_U32,        IRON_DTYPE_U64,
    IRON_DTYPE_F16,        IRON_DTYPE_BF16,       IRON_DTYPE_F32,
    IRON_DTYPE_F64,        IRON_DTYPE_C64,        IRON_DTYPE_C128,
    IRON_DTYPE_S4,         IRON_DTYPE_U4,         IRON_DTYPE_S2,
    IRON_DTYPE_U2,         IRON_DTYPE_F8E5M2,     IRON_DTYPE_F8E4M3FN,
    IRON_DTYPE_F8E4M3FNUZ, IRON_DTYPE_F8E5M2FNUZ, IRON_DTYPE_F8E4M3B11FNUZ,
    IRON_DTYPE_F8E4M3,     IRON_DTYPE_F8E3M4,     IRON_DTYPE_F8E8M0FNU,
    IRON_DTYPE_F4E2M1FN,
};
#define NUM_DTYPES (int)(sizeof(kDtypes) / sizeof(kDtypes[0]))

enum { ST_TRACED, ST_CONST, ST_COMPUTED, NUM_START_KINDS };
static const char *const kStartNames[NUM_START_KINDS] = {"", " const",
                                                         " computed"};

typedef struct dcase {
  int fam, shape;
  iron_dtype_t dt, idx;
  int starts;  // ST_*
} dcase_t;

// ---------------------------------------------------------------------------
// Building

typedef struct pb {
  iron_ir_module_t *m;
  iron_ir_func_t *f;
  iron_ir_block_t *b;
  const dcase_t *c;
} pb_t;

static const iron_ir_type_t *ty(pb_t *p, iron_dtype_t dt, int32_t rank,
                                const int64_t *dims) {
  return iron_ir_builder_tensor_type(p->m, dt, rank, dims);
}

// The dtypes whose arithmetic the host runs (s2/u2 and f6 have none).
static bool has_arith(iron_dtype_t dt) {
  return dt != IRON_DTYPE_S2 && dt != IRON_DTYPE_U2;
}

static iron_ir_value_t *ew(pb_t *p, iron_ir_value_t *a, iron_ir_value_t *b) {
  iron_ir_value_t *in[2] = {a, b};
  iron_op_kind_t k =
      a->type->dtype == IRON_DTYPE_PRED ? IRON_OP_XOR : IRON_OP_ADD;
  return iron_ir_builder_op1(p->m, p->f, p->b, k, 2, in, a->type);
}

static iron_ir_value_t *scalar_const(pb_t *p, iron_dtype_t dt, int64_t v) {
  const iron_ir_type_t *t = iron_ir_builder_scalar_type(p->m, dt);
  uint8_t bytes[8];
  memcpy(bytes, &v, 8);  // little-endian: the low bytes are the value
  return iron_ir_builder_constant(p->m, p->f, p->b, t, bytes,
                                  iron_dtype_size(dt), false);
}

// Start indices: traced arguments args[first..], constants (in range,
// negative, far past the end, by dim), or computed from the arguments as
// jax normalizes an index into a dim of n: select(i < 0, i + n, i).
static void starts(pb_t *p, uint32_t first, int32_t rank, int salt,
                   const int64_t *dims, iron_ir_value_t **out) {
  static const int64_t kConst[] = {2, -3, 1000, 1, 0};
  const iron_ir_type_t *it = iron_ir_builder_scalar_type(p->m, p->c->idx);
  const iron_ir_type_t *tp = iron_ir_builder_scalar_type(p->m, IRON_DTYPE_PRED);
  for (int32_t d = 0; d < rank; ++d) {
    iron_ir_value_t *a = &p->b->args[first + (uint32_t)d];
    if (p->c->starts == ST_TRACED) {
      out[d] = a;
      continue;
    }
    if (p->c->starts == ST_COMPUTED) {
      iron_ir_value_t *zero = scalar_const(p, p->c->idx, 0);
      iron_ir_value_t *n = scalar_const(p, p->c->idx, dims[d % 4]);
      iron_ir_value_t *cin[2] = {a, zero};
      iron_ir_op_t *lt = iron_ir_builder_op(p->m, p->f, p->b, IRON_OP_COMPARE,
                                            2, cin, 1, &tp, 0);
      iron_ir_builder_attr(
          p->m, lt, "comparison_direction",
          iron_ir_builder_attr_enum(p->m, IRON_ENUM_COMPARISON_DIRECTION,
                                    IRON_CMP_LT));
      iron_ir_value_t *ain[2] = {a, n};
      iron_ir_value_t *wrapped =
          iron_ir_builder_op1(p->m, p->f, p->b, IRON_OP_ADD, 2, ain, it);
      iron_ir_value_t *sin[3] = {&lt->results[0], wrapped, a};
      out[d] = iron_ir_builder_op1(p->m, p->f, p->b, IRON_OP_SELECT, 3, sin, it);
      continue;
    }
    (void)it;
    out[d] = scalar_const(p, p->c->idx, kConst[(d + salt) % 5]);
  }
}

static iron_ir_value_t *dslice(pb_t *p, iron_ir_value_t *x,
                               iron_ir_value_t **st, const int64_t *sizes,
                               int32_t rank) {
  iron_ir_value_t *in[5] = {x};
  for (int32_t d = 0; d < rank; ++d) in[1 + d] = st[d];
  const iron_ir_type_t *rt = ty(p, x->type->dtype, rank, sizes);
  iron_ir_op_t *op = iron_ir_builder_op(p->m, p->f, p->b,
                                        IRON_OP_DYNAMIC_SLICE,
                                        1 + (uint32_t)rank, in, 1, &rt, 0);
  iron_ir_builder_attr(p->m, op, "slice_sizes",
                       iron_ir_builder_attr_i64s(p->m, (uint32_t)rank, sizes));
  return &op->results[0];
}

static iron_ir_value_t *dupdate(pb_t *p, iron_ir_value_t *x,
                                iron_ir_value_t *u, iron_ir_value_t **st) {
  int32_t rank = x->type->rank;
  iron_ir_value_t *in[6] = {x, u};
  for (int32_t d = 0; d < rank; ++d) in[2 + d] = st[d];
  return iron_ir_builder_op1(p->m, p->f, p->b, IRON_OP_DYNAMIC_UPDATE_SLICE,
                             2 + (uint32_t)rank, in, x->type);
}

static iron_ir_value_t *bcast(pb_t *p, iron_ir_value_t *v,
                              const iron_ir_type_t *rt, const int64_t *bd) {
  iron_ir_op_t *op = iron_ir_builder_op(p->m, p->f, p->b,
                                        IRON_OP_BROADCAST_IN_DIM, 1, &v, 1,
                                        &rt, 0);
  iron_ir_builder_attr(
      p->m, op, "broadcast_dimensions",
      iron_ir_builder_attr_i64s(p->m, (uint32_t)v->type->rank, bd));
  return &op->results[0];
}

static iron_ir_value_t *reshape(pb_t *p, iron_ir_value_t *v,
                                const iron_ir_type_t *rt) {
  return iron_ir_builder_op1(p->m, p->f, p->b, IRON_OP_RESHAPE, 1, &v, rt);
}

// Builds case c (NULL when the family does not apply to the shape).
static iron_ir_module_t *build(const dcase_t *c) {
  const shape_t *s = &kShapes[c->shape];
  int32_t r = s->rank;
  iron_dtype_t dt = c->dt;
  bool arith = has_arith(dt);
  int64_t ucount = 1;
  for (int32_t d = 0; d < r; ++d) ucount *= s->u[d];
  if (!arith && c->fam != FAM_UNFUSED && c->fam != FAM_DS_UNIT) return NULL;
  if ((c->fam == FAM_DS_UNIT || c->fam == FAM_DUS_RESHAPE ||
       c->fam == FAM_DUS_UNIT || c->fam == FAM_DS_SCALAR) && r == 0)
    return NULL;
  iron_ir_module_t *m = iron_ir_builder_module_create("dslice_emu", 1);
  pb_t p = {m, NULL, NULL, c};
  const iron_ir_type_t *tx = iron_ir_builder_tensor_type(m, dt, r, s->x);
  const iron_ir_type_t *tu = iron_ir_builder_tensor_type(m, dt, r, s->u);
  const iron_ir_type_t *ts = iron_ir_builder_scalar_type(m, dt);
  const iron_ir_type_t *ti = iron_ir_builder_scalar_type(m, c->idx);
  int64_t flat[1] = {ucount};
  const iron_ir_type_t *tflat = iron_ir_builder_tensor_type(m, dt, 1, flat);
  // x[i]'s shapes: the window [1, x1, ...] and the row [x1, ...].
  int64_t win[4] = {1}, row[4] = {0};
  for (int32_t d = 1; d < r; ++d) win[d] = row[d - 1] = s->x[d];
  const iron_ir_type_t *trow =
      iron_ir_builder_tensor_type(m, dt, r > 0 ? r - 1 : 0, row);
  // The stacked shapes of dus_unit: [2, x...] and [1, u...].
  int64_t sx[5] = {2}, su[5] = {1};
  for (int32_t d = 0; d < r && d < 3; ++d) {
    sx[d + 1] = s->x[d];
    su[d + 1] = s->u[d];
  }
  int32_t sr = r < 4 ? r + 1 : 4;
  const iron_ir_type_t *tsx = iron_ir_builder_tensor_type(m, dt, sr, sx);
  const iron_ir_type_t *tsu = iron_ir_builder_tensor_type(m, dt, sr, su);

  const iron_ir_type_t *ins[16];
  const iron_ir_type_t *outs[4];
  uint32_t ni = 0, no = 0;
  int32_t nstarts = r;
  switch (c->fam) {
    case FAM_DS_EW: ins[ni++] = tx; ins[ni++] = tu; outs[no++] = tu; break;
    case FAM_DS_UNIT:
      ins[ni++] = tx;
      ins[ni++] = trow;
      outs[no++] = trow;
      break;
    case FAM_DUS_EW:
      ins[ni++] = tx; ins[ni++] = tu; ins[ni++] = tu; outs[no++] = tx;
      break;
    case FAM_DUS_BCAST: ins[ni++] = tx; ins[ni++] = ts; outs[no++] = tx; break;
    case FAM_DUS_RESHAPE:
      ins[ni++] = tx; ins[ni++] = tflat; ins[ni++] = tflat; outs[no++] = tx;
      break;
    case FAM_DUS_UNIT:
      if (r >= 4) {
        iron_ir_module_destroy(m);
        return NULL;
      }
      ins[ni++] = tsx; ins[ni++] = tu; ins[ni++] = tu; outs[no++] = tsx;
      nstarts = sr;
      break;
    case FAM_DS_DUS:
      ins[ni++] = tx; ins[ni++] = tu; outs[no++] = tx; outs[no++] = tu;
      nstarts = 2 * r;
      break;
    case FAM_TWO_ROOTS:
      ins[ni++] = tx; ins[ni++] = tx; ins[ni++] = tu; ins[ni++] = tu;
      outs[no++] = tx; outs[no++] = tx; outs[no++] = tu;
      break;
    case FAM_UNFUSED:
      ins[ni++] = tx; ins[ni++] = tu; outs[no++] = tu; outs[no++] = tx;
      break;
    case FAM_DS_SCALAR:
      ins[ni++] = tx; ins[ni++] = tu; outs[no++] = tu;
      break;
  }
  uint32_t first = ni;
  if (c->starts != ST_CONST)
    for (int32_t d = 0; d < nstarts; ++d) ins[ni++] = ti;
  p.f = iron_ir_builder_func(m, "main", true, ni, ins, no, outs);
  p.b = iron_ir_builder_func_block(p.f);
  iron_ir_value_t *a = p.b->args;
  iron_ir_value_t *st[8], *res[4];
  const int64_t *sdims = c->fam == FAM_DUS_UNIT ? sx : s->x;
  starts(&p, first, nstarts, (int)c->shape, sdims, st);
  switch (c->fam) {
    case FAM_DS_EW:
      res[0] = ew(&p, dslice(&p, &a[0], st, s->u, r), &a[1]);
      break;
    case FAM_DS_UNIT: {
      iron_ir_value_t *w = dslice(&p, &a[0], st, win, r);
      res[0] = reshape(&p, w, trow);
      if (arith) res[0] = ew(&p, res[0], &a[1]);
      break;
    }
    case FAM_DUS_EW:
      res[0] = dupdate(&p, &a[0], ew(&p, &a[1], &a[2]), st);
      break;
    case FAM_DUS_BCAST: {
      iron_ir_value_t *v = ew(&p, &a[1], &a[1]);  // a scalar computed
      res[0] = dupdate(&p, &a[0], bcast(&p, v, tu, NULL), st);
      break;
    }
    case FAM_DUS_RESHAPE:
      res[0] = dupdate(&p, &a[0], reshape(&p, ew(&p, &a[1], &a[2]), tu), st);
      break;
    case FAM_DUS_UNIT: {
      int64_t bd[4] = {1, 2, 3, 4};
      res[0] = dupdate(&p, &a[0], bcast(&p, ew(&p, &a[1], &a[2]), tsu, bd),
                       st);
      break;
    }
    case FAM_DS_DUS: {
      iron_ir_value_t *w = dslice(&p, &a[0], st, s->u, r);
      iron_ir_value_t *y = ew(&p, w, &a[1]);
      res[0] = dupdate(&p, &a[0], y, st + r);
      res[1] = y;
      break;
    }
    case FAM_TWO_ROOTS: {
      iron_ir_value_t *y = ew(&p, &a[2], &a[3]);
      res[0] = dupdate(&p, &a[0], y, st);
      // The other root's starts: the same values, dims reversed.
      iron_ir_value_t *rs[4];
      for (int32_t d = 0; d < r; ++d) rs[d] = st[r - 1 - d];
      res[1] = dupdate(&p, &a[1], y, rs);
      res[2] = y;
      break;
    }
    case FAM_UNFUSED:
      res[0] = dslice(&p, &a[0], st, s->u, r);
      res[1] = dupdate(&p, &a[0], &a[1], st);
      break;
    case FAM_DS_SCALAR: {
      // x[i, j, ...] as one element, broadcast over the update's shape.
      int64_t ones[4] = {1, 1, 1, 1};
      iron_ir_value_t *e = dslice(&p, &a[0], st, ones, r);
      iron_ir_value_t *sc = reshape(&p, e, ts);
      iron_ir_value_t *b = bcast(&p, sc, tu, NULL);
      res[0] = arith ? ew(&p, b, &a[1]) : b;
      break;
    }
  }
  iron_ir_builder_return(m, p.f, p.b, IRON_OP_FUNC_RETURN, no, res);
  return m;
}

// Every generated kernel text once (numbers aside) through NVRTC.
static void nvrtc_compile_all(void) {
  size_t n = g_cuda_emu.num_k;
  const char **srcs = calloc(n + 1, sizeof(char *));
  for (size_t i = 0; i < n; ++i) srcs[i] = g_cuda_emu.k[i].source;
  cuda_test_nvrtc_compile_all(n, srcs);
  free(srcs);
}

typedef struct prog {
  dcase_t c;
  char what[128];
  iron_executable_t *ref, *emu;
} prog_t;

static void test_dynamic_slices(void) {
  setenv("IRON_DEVICE", "host", 1);
  setenv("IRON_HOST_LIBM_EXP", "1", 1);
  CHECK(cuda_emu_have_cxx());
  if (!cuda_emu_have_cxx()) return;
  bool verbose = getenv("IRON_TEST_VERBOSE") != NULL;
  iron_runtime_t *rt_ref = NULL, *rt_emu = NULL;
  CHECK_OK(iron_runtime_create(NULL, &rt_ref));
  CHECK_OK(cuda_emu_exec_runtime(&rt_emu));
  if (!rt_ref || !rt_emu) return;
  // The cases: every family x dtype x shape with traced starts (s32);
  // constant and computed starts for a few dtypes; every index dtype for
  // f32 (traced, constant or computed in turn; all three for the sub-byte
// ones, stored one per byte in the low bits).
  static const iron_dtype_t kIdx[] = {
      IRON_DTYPE_S8,  IRON_DTYPE_S16, IRON_DTYPE_S64, IRON_DTYPE_U8,
      IRON_DTYPE_U16, IRON_DTYPE_U32, IRON_DTYPE_U64, IRON_DTYPE_S4,
      IRON_DTYPE_U4,  IRON_DTYPE_S2,  IRON_DTYPE_U2};
  enum { NUM_IDX = sizeof(kIdx) / sizeof(kIdx[0]) };
  size_t cap = NUM_FAMS * NUM_SHAPES * (NUM_DTYPES + 6 + NUM_IDX * 3);
  prog_t *progs = calloc(cap, sizeof(*progs));
  size_t np = 0;
  for (int fam = 0; fam < NUM_FAMS; ++fam)
    for (int sh = 0; sh < NUM_SHAPES; ++sh) {
      // The large shape (thread and block boundaries) for a dtype of each
      // element size; the small ones for every dtype.
      for (int d = 0; d < NUM_DTYPES; ++d) {
        iron_dtype_t dt = kDtypes[d];
        if (kShapes[sh].x[0] >= 256 && dt != IRON_DTYPE_PRED &&
            dt != IRON_DTYPE_BF16 && dt != IRON_DTYPE_F32 &&
            dt != IRON_DTYPE_C64 && dt != IRON_DTYPE_C128 &&
            dt != IRON_DTYPE_F8E4M3FN)
          continue;
        progs[np++].c = (dcase_t){fam, sh, dt, IRON_DTYPE_S32, ST_TRACED};
      }
      static const iron_dtype_t kConstDt[] = {IRON_DTYPE_F32, IRON_DTYPE_PRED,
                                              IRON_DTYPE_BF16};
      for (int d = 0; d < 3; ++d) {
        progs[np++].c = (dcase_t){fam, sh, kConstDt[d], IRON_DTYPE_S32, ST_CONST};
        progs[np++].c =
            (dcase_t){fam, sh, kConstDt[d], IRON_DTYPE_S32, ST_COMPUTED};
      }
      for (int k = 0; k < NUM_IDX; ++k) {
        bool sub = iron_dtype_bits(kIdx[k]) < 8;  // every start kind
        for (int sk = 0; sk < NUM_START_KINDS; ++sk)
          if (sub || sk == k % NUM_START_KINDS)
            progs[np++].c = (dcase_t){fam, sh, IRON_DTYPE_F32, kIdx[k], sk};
      }
    }
  int built = 0, host_refused = 0, cuda_refused = 0;
  for (size_t i = 0; i < np; ++i) {
    prog_t *p = &progs[i];
    snprintf(p->what, sizeof(p->what), "%s %s shape %d idx %s%s",
             kFamNames[p->c.fam], iron_dtype_name(p->c.dt), p->c.shape,
             iron_dtype_name(p->c.idx), kStartNames[p->c.starts]);
    iron_ir_module_t *m1 = build(&p->c);
    if (!m1) continue;
    iron_ir_module_t *m2 = build(&p->c);
    built++;
    iron_status_t st =
        iron_executable_compile_module(rt_ref, m1, NULL, 0, NULL, &p->ref);
    if (st) {
      if (verbose) fprintf(stderr, "%s: host: %s\n", p->what,
                           iron_status_message(st));
      host_refused++;
      iron_status_free(st);
      iron_ir_module_destroy(m2);
      continue;
    }
    st = iron_executable_compile_module(rt_emu, m2, NULL, 0, NULL, &p->emu);
    if (st) {
      // Only the narrow dtypes may be refused (by name), never a fusion.
      bool ok = iron_status_code(st) == IRON_STATUS_UNIMPLEMENTED &&
                iron_cuda_ctype(p->c.dt) == NULL &&
                !strstr(iron_status_message(st), "fusion");
      if (!ok || verbose)
        fprintf(stderr, "%s: CUDA: %s\n", p->what, iron_status_message(st));
      CHECK(ok);
      cuda_refused++;
      iron_status_free(st);
      iron_executable_release(p->ref);
      p->ref = NULL;
    }
  }
  bool lib = cuda_emu_exec_build();
  CHECK(lib);
  int runs = 0, differ = 0, failed = 0;
  for (size_t i = 0; i < np && lib; ++i) {
    prog_t *p = &progs[i];
    if (!p->ref || !p->emu) continue;
    uint32_t no = iron_executable_num_outputs(p->ref);
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      uint8_t **want = NULL, **got = NULL;
      iron_status_t sr = cuda_emu_run_program(
          p->ref, iron_runtime_device(rt_ref, 0), seed, NULL, &want);
      iron_status_t se = cuda_emu_run_program(
          p->emu, iron_runtime_device(rt_emu, 0), seed, NULL, &got);
      if (sr || se) {
        fprintf(stderr, "%s seed %llu: host: %s; CUDA emulation: %s\n",
                p->what, (unsigned long long)seed,
                sr ? iron_status_message(sr) : "ok",
                se ? iron_status_message(se) : "ok");
        failed++;
      } else {
        char what[200];
        snprintf(what, sizeof(what), "%s seed %llu", p->what,
                 (unsigned long long)seed);
        if (cuda_emu_compare(p->ref, want, got, what)) differ++;
        runs++;
      }
      iron_status_free(sr);
      iron_status_free(se);
      cuda_emu_free_results(want, no);
      cuda_emu_free_results(got, no);
    }
  }
  fprintf(stderr,
          "dynamic slices: %d programs (%d refused by the host, %d by CUDA), "
          "%d runs, %d differ, %d failed; %zu kernels, %lld launches (%lld "
          "fused)\n",
          built, host_refused, cuda_refused, runs, differ, failed,
          g_cuda_emu.num_k, (long long)g_cuda_emu.launches,
          (long long)g_cuda_emu.fused_launches);
  CHECK_EQ_INT(differ, 0);
  CHECK_EQ_INT(failed, 0);
  CHECK(runs > 1000);
  CHECK(g_cuda_emu.fused_launches > 1000);
  if (getenv("IRON_TEST_NO_NVRTC") == NULL) nvrtc_compile_all();
  for (size_t i = 0; i < np; ++i) {
    if (progs[i].ref) iron_executable_release(progs[i].ref);
    if (progs[i].emu) iron_executable_release(progs[i].emu);
  }
  free(progs);
  iron_runtime_release(rt_ref);
  iron_runtime_release(rt_emu);
  cuda_emu_exec_shutdown();
}

static const iron_test_case_t kTests[] = {
    {"dynamic_slices", test_dynamic_slices},
};
IRON_TEST_MAIN(kTests)
