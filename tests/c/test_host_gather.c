// stablehlo.gather host kernel against a per-element reference of the
// StableHLO definition (with XLA's clamping of start indices) over random
// dimension numbers: batching dims, collapsed dims, implicit/explicit
// index_vector_dim anywhere, every index dtype, element sizes 1..16.
#include "host_gather_case.h"
#include "test.h"

static iron_threadpool_t *g_pool;

static void set_index(iron_tensor_t *t, int64_t i, int64_t v) {
  switch (t->dtype) {
    case IRON_DTYPE_S8: ((int8_t *)t->data)[i] = (int8_t)v; break;
    case IRON_DTYPE_U8: ((uint8_t *)t->data)[i] = (uint8_t)v; break;
    case IRON_DTYPE_S16: ((int16_t *)t->data)[i] = (int16_t)v; break;
    case IRON_DTYPE_U32: ((uint32_t *)t->data)[i] = (uint32_t)v; break;
    case IRON_DTYPE_S32: ((int32_t *)t->data)[i] = (int32_t)v; break;
    case IRON_DTYPE_U64: ((uint64_t *)t->data)[i] = (uint64_t)v; break;
    default: ((int64_t *)t->data)[i] = v; break;
  }
}

static bool is_unsigned(iron_dtype_t dt) {
  return dt == IRON_DTYPE_U8 || dt == IRON_DTYPE_U32 || dt == IRON_DTYPE_U64;
}

// Fills indices with values around the valid range (clamping is exercised)
// and returns them as int64 for the reference.
static int64_t *fill_indices(const gcase_t *c, iron_tensor_t *it) {
  int64_t *vals = calloc((size_t)it->count + 1, sizeof(int64_t));
  int64_t coord[IRON_MAX_RANK];
  for (int64_t i = 0; i < it->count; ++i) {
    gc_unravel(i, c->irank, c->idims, coord);
    int k = c->ivd < c->irank ? (int)coord[c->ivd] : 0;
    int64_t dim = c->odims[c->sm[k]];
    int64_t lo = is_unsigned(it->dtype) ? 0 : -3;
    int64_t v = ht_rand_range(lo, dim + 2);
    set_index(it, i, v);
    vals[i] = v;
  }
  return vals;
}

static void build_gather(ht_op_t *b, const gcase_t *c, iron_dtype_t dt,
                         iron_dtype_t idt) {
  ht_init(b, IRON_OP_GATHER);
  ht_operand(b, dt, c->orank, c->odims);
  ht_operand(b, idt, c->irank, c->idims);
  ht_result(b, dt, c->rrank, c->rdims);
  gc_attr(b, "offset_dims", c->n_off, c->off);
  gc_attr(b, "collapsed_slice_dims", c->n_col, c->col);
  gc_attr(b, "operand_batching_dims", c->n_b, c->ob);
  gc_attr(b, "start_indices_batching_dims", c->n_b, c->ib);
  gc_attr(b, "start_index_map", c->n_sm, c->sm);
  gc_attr(b, "index_vector_dim", 1, &c->ivd);
  gc_attr(b, "slice_sizes", c->orank, c->slice);
}

static void test_random(void) {
  static const iron_dtype_t kDt[] = {IRON_DTYPE_S8, IRON_DTYPE_F16,
                                     IRON_DTYPE_F32, IRON_DTYPE_F64,
                                     IRON_DTYPE_C128, IRON_DTYPE_PRED};
  static const iron_dtype_t kIdt[] = {IRON_DTYPE_S32, IRON_DTYPE_S64,
                                      IRON_DTYPE_U8, IRON_DTYPE_S8,
                                      IRON_DTYPE_U32, IRON_DTYPE_U64,
                                      IRON_DTYPE_S16};
  int bad_cases = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    gcase_t c;
    gc_random(&c);
    iron_dtype_t dt = kDt[iter % 6];
    iron_dtype_t idt = kIdt[ht_rand_range(0, 6)];
    size_t es = iron_dtype_size(dt);
    ht_op_t b;
    build_gather(&b, &c, dt, idt);
    iron_tensor_t *x = ht_tensor(dt, c.orank, c.odims);
    iron_tensor_t *it = ht_tensor(idt, c.irank, c.idims);
    iron_tensor_t *out = ht_tensor(dt, c.rrank, c.rdims);
    ht_fill_bytes(x);
    int64_t *iv = fill_indices(&c, it);
    iron_tensor_t *ins[2] = {x, it};
    iron_tensor_t *outs[1] = {out};
    iron_status_t st = ht_run(&b, iter % 2 ? g_pool : NULL, NULL, ins, outs);
    CHECK_OK(st);
    int64_t r[IRON_MAX_RANK], start[IRON_MAX_RANK], offs[IRON_MAX_RANK],
        oi[IRON_MAX_RANK];
    bool ok = true;
    for (int64_t e = 0; e < out->count && ok; ++e) {
      gc_unravel(e, c.rrank, c.rdims, r);
      gc_locate(&c, r, iv, start, offs);
      for (int d = 0; d < c.orank; ++d) {
        int64_t s = start[d];
        int64_t hi = c.odims[d] - c.slice[d];
        if (s < 0) s = 0;
        if (s > hi) s = hi;
        oi[d] = s + offs[d];
      }
      int64_t src = gc_ravel(c.orank, c.odims, oi);
      if (memcmp((char *)out->data + (size_t)e * es,
                 (char *)x->data + (size_t)src * es, es) != 0)
        ok = false;
    }
    if (!ok && bad_cases++ < 3)
      fprintf(stderr, "mismatch iter %d orank %d irank %d ivd %lld nb %d\n",
              iter, c.orank, c.irank, (long long)c.ivd, c.n_b);
    CHECK(ok);
    free(iv);
    ht_tensor_free(x);
    ht_tensor_free(it);
    ht_tensor_free(out);
  }
}

// Embedding lookup: rows of a table by 4096 indices, threaded.
static void test_embedding(void) {
  int64_t tdims[2] = {3000, 64}, idims[2] = {4096, 1}, rdims[2] = {4096, 64};
  gcase_t c;
  memset(&c, 0, sizeof(c));
  ht_op_t b;
  ht_init(&b, IRON_OP_GATHER);
  ht_operand(&b, IRON_DTYPE_F32, 2, tdims);
  ht_operand(&b, IRON_DTYPE_S32, 2, idims);
  ht_result(&b, IRON_DTYPE_F32, 2, rdims);
  int64_t off[1] = {1}, col[1] = {0}, sm[1] = {0}, ivd = 1, sl[2] = {1, 64};
  gc_attr(&b, "offset_dims", 1, off);
  gc_attr(&b, "collapsed_slice_dims", 1, col);
  gc_attr(&b, "start_index_map", 1, sm);
  gc_attr(&b, "index_vector_dim", 1, &ivd);
  gc_attr(&b, "slice_sizes", 2, sl);
  iron_tensor_t *x = ht_tensor(IRON_DTYPE_F32, 2, tdims);
  iron_tensor_t *it = ht_tensor(IRON_DTYPE_S32, 2, idims);
  iron_tensor_t *out = ht_tensor(IRON_DTYPE_F32, 2, rdims);
  ht_fill_bytes(x);
  int32_t *ip = it->data;
  for (int i = 0; i < 4096; ++i) ip[i] = (int32_t)ht_rand_range(-5, 3005);
  iron_tensor_t *ins[2] = {x, it};
  iron_tensor_t *outs[1] = {out};
  CHECK_OK(ht_run(&b, g_pool, NULL, ins, outs));
  bool ok = true;
  for (int i = 0; i < 4096; ++i) {
    int64_t row = ip[i] < 0 ? 0 : ip[i] > 2999 ? 2999 : ip[i];
    if (memcmp((float *)out->data + i * 64, (float *)x->data + row * 64,
               64 * 4))
      ok = false;
  }
  CHECK(ok);
  ht_tensor_free(x);
  ht_tensor_free(it);
  ht_tensor_free(out);
}

static void test_refusals(void) {
  int64_t d2[2] = {4, 3}, d1[2] = {2, 1}, r2[2] = {2, 3};
  ht_op_t b;
  ht_init(&b, IRON_OP_GATHER);
  ht_operand(&b, IRON_DTYPE_F32, 2, d2);
  ht_operand(&b, IRON_DTYPE_F32, 2, d1);  // float indices: refused
  ht_result(&b, IRON_DTYPE_F32, 2, r2);
  int64_t off[1] = {1}, col[1] = {0}, sm[1] = {0}, ivd = 1, sl[2] = {1, 3};
  gc_attr(&b, "offset_dims", 1, off);
  gc_attr(&b, "collapsed_slice_dims", 1, col);
  gc_attr(&b, "start_index_map", 1, sm);
  gc_attr(&b, "index_vector_dim", 1, &ivd);
  gc_attr(&b, "slice_sizes", 2, sl);
  void *params = NULL;
  const iron_kernel_t *k = iron_host_kernel_lookup(IRON_OP_GATHER);
  iron_status_t st = k->prepare(&b.op, NULL, &params);
  CHECK(st != IRON_OK);
  iron_status_free(st);
  // Wrong result shape.
  b.operand_types[1].dtype = IRON_DTYPE_S32;
  b.result_types[0].dims[1] = 2;
  st = k->prepare(&b.op, NULL, &params);
  CHECK(st != IRON_OK);
  iron_status_free(st);
  b.result_types[0].dims[1] = 3;
  st = k->prepare(&b.op, NULL, &params);
  CHECK_OK(st);
  free(params);
}

static void setup(void) { CHECK_OK(iron_threadpool_create(2, &g_pool)); }
static void teardown(void) { iron_threadpool_destroy(g_pool); }

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"random", test_random},
    {"embedding", test_embedding},
    {"refusals", test_refusals},
    {"teardown", teardown},
};
IRON_TEST_MAIN(kTests)
