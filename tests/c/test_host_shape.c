// Host data-movement kernels against index-math references, over random
// shapes (zero-size dims and rank 0 included) and several element sizes.
#include "base/half.h"
#include "base/threadpool.h"
#include "host_test_ops.h"
#include "test.h"

static iron_threadpool_t *g_pool;

static const iron_dtype_t kDtypes[] = {IRON_DTYPE_U8, IRON_DTYPE_BF16,
                                       IRON_DTYPE_F32, IRON_DTYPE_S64,
                                       IRON_DTYPE_C128, IRON_DTYPE_F8E4M3FN};

static iron_dtype_t rand_dtype(void) {
  return kDtypes[ht_rand() % (sizeof(kDtypes) / sizeof(kDtypes[0]))];
}

static void unravel(int64_t flat, int rank, const int64_t *dims,
                    int64_t *idx) {
  for (int i = rank - 1; i >= 0; --i) {
    idx[i] = flat % dims[i];
    flat /= dims[i];
  }
}
static int64_t ravel(int rank, const int64_t *dims, const int64_t *idx) {
  int64_t f = 0;
  for (int i = 0; i < rank; ++i) f = f * dims[i] + idx[i];
  return f;
}
static void rand_dims(int rank, int64_t *dims, int64_t maxd) {
  for (int i = 0; i < rank; ++i) dims[i] = ht_rand_range(0, maxd);
  // Mostly non-empty shapes; zero-size dims now and then.
  if (ht_rand() % 4)
    for (int i = 0; i < rank; ++i)
      if (dims[i] == 0) dims[i] = 1 + ht_rand_range(0, maxd);
}
static bool elem_eq(const iron_tensor_t *a, int64_t ia, const iron_tensor_t *b,
                    int64_t ib) {
  size_t es = iron_dtype_size(a->dtype);
  return memcmp((char *)a->data + ia * es, (char *)b->data + ib * es, es) == 0;
}

static void next_perm(int n, int64_t *p) {  // lexicographic; wraps around
  int i = n - 2;
  while (i >= 0 && p[i] >= p[i + 1]) i--;
  if (i < 0) {
    for (int a = 0, b = n - 1; a < b; ++a, --b) {
      int64_t t = p[a]; p[a] = p[b]; p[b] = t;
    }
    return;
  }
  int j = n - 1;
  while (p[j] <= p[i]) j--;
  int64_t t = p[i]; p[i] = p[j]; p[j] = t;
  for (int a = i + 1, b = n - 1; a < b; ++a, --b) {
    t = p[a]; p[a] = p[b]; p[b] = t;
  }
}

static void test_transpose(void) {
  for (int rank = 0; rank <= 5; ++rank) {
    int64_t perm[IRON_MAX_RANK];
    int nperm = 1;
    for (int i = 1; i <= rank; ++i) nperm *= i;
    for (int i = 0; i < rank; ++i) perm[i] = i;
    for (int pi = 0; pi < nperm; ++pi, next_perm(rank, perm)) {
      int64_t in_dims[IRON_MAX_RANK], out_dims[IRON_MAX_RANK];
      rand_dims(rank, in_dims, rank >= 5 ? 3 : 5);
      for (int i = 0; i < rank; ++i) out_dims[i] = in_dims[perm[i]];
      iron_dtype_t dt = rand_dtype();
      ht_op_t b;
      ht_init(&b, IRON_OP_TRANSPOSE);
      ht_operand(&b, dt, rank, in_dims);
      ht_result(&b, dt, rank, out_dims);
      ht_attr_i64(&b, "permutation", rank, perm);
      iron_tensor_t *in = ht_tensor(dt, rank, in_dims);
      iron_tensor_t *out = ht_tensor(dt, rank, out_dims);
      ht_fill_bytes(in);
      CHECK_OK(ht_run(&b, g_pool, NULL, &in, &out));
      int bad = 0;
      for (int64_t f = 0; f < out->count; ++f) {
        int64_t oi[IRON_MAX_RANK], ii[IRON_MAX_RANK];
        unravel(f, rank, out_dims, oi);
        for (int i = 0; i < rank; ++i) ii[perm[i]] = oi[i];
        if (!elem_eq(out, f, in, ravel(rank, in_dims, ii))) bad++;
      }
      CHECK_EQ_INT(bad, 0);
      ht_tensor_free(in);
      ht_tensor_free(out);
    }
  }
  // Larger transposes (tiled copies with outer dims and partial tiles) in
  // every permutation of rank 3 and 4, several element sizes.
  static const int64_t big3[3] = {9, 17, 40}, big4[4] = {3, 12, 10, 20};
  for (int rank = 3; rank <= 4; ++rank) {
    int64_t perm[4] = {0, 1, 2, 3};
    int nperm = rank == 3 ? 6 : 24;
    for (int pi = 0; pi < nperm; ++pi, next_perm(rank, perm)) {
      int64_t in_dims[4], out_dims[4];
      for (int i = 0; i < rank; ++i) in_dims[i] = rank == 3 ? big3[i] : big4[i];
      for (int i = 0; i < rank; ++i) out_dims[i] = in_dims[perm[i]];
      iron_dtype_t dt = kDtypes[pi % 6];
      ht_op_t b;
      ht_init(&b, IRON_OP_TRANSPOSE);
      ht_operand(&b, dt, rank, in_dims);
      ht_result(&b, dt, rank, out_dims);
      ht_attr_i64(&b, "permutation", rank, perm);
      iron_tensor_t *in = ht_tensor(dt, rank, in_dims);
      iron_tensor_t *out = ht_tensor(dt, rank, out_dims);
      ht_fill_bytes(in);
      CHECK_OK(ht_run(&b, g_pool, NULL, &in, &out));
      int bad = 0;
      for (int64_t f = 0; f < out->count; ++f) {
        int64_t oi[IRON_MAX_RANK], ii[IRON_MAX_RANK];
        unravel(f, rank, out_dims, oi);
        for (int i = 0; i < rank; ++i) ii[perm[i]] = oi[i];
        if (!elem_eq(out, f, in, ravel(rank, in_dims, ii))) bad++;
      }
      CHECK_EQ_INT(bad, 0);
      ht_tensor_free(in);
      ht_tensor_free(out);
    }
  }
  // A large 2-D transpose through the thread pool.
  int64_t d[2] = {300, 517}, e[2] = {517, 300}, p[2] = {1, 0};
  ht_op_t b;
  ht_init(&b, IRON_OP_TRANSPOSE);
  ht_operand(&b, IRON_DTYPE_F32, 2, d);
  ht_result(&b, IRON_DTYPE_F32, 2, e);
  ht_attr_i64(&b, "permutation", 2, p);
  iron_tensor_t *in = ht_tensor(IRON_DTYPE_F32, 2, d);
  iron_tensor_t *out = ht_tensor(IRON_DTYPE_F32, 2, e);
  ht_fill_bytes(in);
  CHECK_OK(ht_run(&b, g_pool, NULL, &in, &out));
  int bad = 0;
  for (int64_t i = 0; i < 300; ++i)
    for (int64_t j = 0; j < 517; ++j)
      if (!elem_eq(out, j * 300 + i, in, i * 517 + j)) bad++;
  CHECK_EQ_INT(bad, 0);
  ht_tensor_free(in);
  ht_tensor_free(out);
}

static void test_broadcast_in_dim(void) {
  for (int iter = 0; iter < 300; ++iter) {
    int orank = (int)ht_rand_range(0, 5);
    int64_t out_dims[IRON_MAX_RANK], in_dims[IRON_MAX_RANK], bd[IRON_MAX_RANK];
    rand_dims(orank, out_dims, 4);
    int irank = 0;
    // Random subset of result dims, in random order.
    for (int d = 0; d < orank; ++d)
      if (ht_rand() % 2) bd[irank++] = d;
    for (int i = irank - 1; i > 0; --i) {
      int j = (int)ht_rand_range(0, i);
      int64_t t = bd[i]; bd[i] = bd[j]; bd[j] = t;
    }
    for (int k = 0; k < irank; ++k)
      in_dims[k] = ht_rand() % 3 == 0 ? 1 : out_dims[bd[k]];
    iron_dtype_t dt = rand_dtype();
    bool old_form = false;
    ht_op_t b;
    if (iter % 5 == 0) {
      // Old broadcast: sizes prepended, operand dims trailing.
      old_form = true;
      int lead = orank - irank;
      ht_init(&b, IRON_OP_BROADCAST);
      for (int k = 0; k < irank; ++k) {
        bd[k] = lead + k;
        in_dims[k] = out_dims[lead + k];
      }
      ht_attr_i64(&b, "broadcast_sizes", lead, out_dims);
    } else {
      ht_init(&b, IRON_OP_BROADCAST_IN_DIM);
      ht_attr_i64(&b, "broadcast_dimensions", irank, bd);
    }
    (void)old_form;
    ht_operand(&b, dt, irank, in_dims);
    ht_result(&b, dt, orank, out_dims);
    iron_tensor_t *in = ht_tensor(dt, irank, in_dims);
    iron_tensor_t *out = ht_tensor(dt, orank, out_dims);
    ht_fill_bytes(in);
    CHECK_OK(ht_run(&b, g_pool, NULL, &in, &out));
    int bad = 0;
    for (int64_t f = 0; f < out->count; ++f) {
      int64_t oi[IRON_MAX_RANK], ii[IRON_MAX_RANK];
      unravel(f, orank, out_dims, oi);
      for (int k = 0; k < irank; ++k) ii[k] = in_dims[k] == 1 ? 0 : oi[bd[k]];
      if (!elem_eq(out, f, in, ravel(irank, in_dims, ii))) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    ht_tensor_free(in);
    ht_tensor_free(out);
  }
}

static void test_slice_reverse_reshape(void) {
  for (int iter = 0; iter < 300; ++iter) {
    int rank = (int)ht_rand_range(0, 4);
    int64_t in_dims[IRON_MAX_RANK], out_dims[IRON_MAX_RANK];
    int64_t st[IRON_MAX_RANK], lim[IRON_MAX_RANK], str[IRON_MAX_RANK];
    rand_dims(rank, in_dims, 7);
    for (int i = 0; i < rank; ++i) {
      st[i] = ht_rand_range(0, in_dims[i]);
      lim[i] = ht_rand_range(st[i], in_dims[i]);
      str[i] = ht_rand_range(1, 3);
      out_dims[i] = (lim[i] - st[i] + str[i] - 1) / str[i];
    }
    iron_dtype_t dt = rand_dtype();
    ht_op_t b;
    ht_init(&b, IRON_OP_SLICE);
    ht_operand(&b, dt, rank, in_dims);
    ht_result(&b, dt, rank, out_dims);
    ht_attr_i64(&b, "start_indices", rank, st);
    ht_attr_i64(&b, "limit_indices", rank, lim);
    ht_attr_i64(&b, "strides", rank, str);
    iron_tensor_t *in = ht_tensor(dt, rank, in_dims);
    iron_tensor_t *out = ht_tensor(dt, rank, out_dims);
    ht_fill_bytes(in);
    CHECK_OK(ht_run(&b, g_pool, NULL, &in, &out));
    int bad = 0;
    for (int64_t f = 0; f < out->count; ++f) {
      int64_t oi[IRON_MAX_RANK], ii[IRON_MAX_RANK];
      unravel(f, rank, out_dims, oi);
      for (int i = 0; i < rank; ++i) ii[i] = st[i] + oi[i] * str[i];
      if (!elem_eq(out, f, in, ravel(rank, in_dims, ii))) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    ht_tensor_free(out);

    // reverse a random subset of dims of the same input
    int64_t rd[IRON_MAX_RANK];
    int nr = 0;
    for (int i = 0; i < rank; ++i)
      if (ht_rand() % 2) rd[nr++] = i;
    ht_init(&b, IRON_OP_REVERSE);
    ht_operand(&b, dt, rank, in_dims);
    ht_result(&b, dt, rank, in_dims);
    ht_attr_i64(&b, "dimensions", nr, rd);
    out = ht_tensor(dt, rank, in_dims);
    CHECK_OK(ht_run(&b, g_pool, NULL, &in, &out));
    bad = 0;
    for (int64_t f = 0; f < out->count; ++f) {
      int64_t ii[IRON_MAX_RANK];
      unravel(f, rank, in_dims, ii);
      for (int k = 0; k < nr; ++k) ii[rd[k]] = in_dims[rd[k]] - 1 - ii[rd[k]];
      if (!elem_eq(out, f, in, ravel(rank, in_dims, ii))) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    ht_tensor_free(out);

    // reshape to a flat vector
    int64_t flat[1] = {in->count};
    ht_init(&b, IRON_OP_RESHAPE);
    ht_operand(&b, dt, rank, in_dims);
    ht_result(&b, dt, 1, flat);
    out = ht_tensor(dt, 1, flat);
    CHECK_OK(ht_run(&b, g_pool, NULL, &in, &out));
    CHECK(memcmp(out->data, in->data, in->nbytes) == 0);
    ht_tensor_free(out);
    ht_tensor_free(in);
  }
}

static void store_index(iron_tensor_t *t, int64_t v) {
  switch (t->dtype) {
    case IRON_DTYPE_S32: *(int32_t *)t->data = (int32_t)v; break;
    case IRON_DTYPE_U8: *(uint8_t *)t->data = (uint8_t)v; break;
    case IRON_DTYPE_S64: *(int64_t *)t->data = v; break;
    case IRON_DTYPE_U32: *(uint32_t *)t->data = (uint32_t)v; break;
    default: *(int16_t *)t->data = (int16_t)v; break;
  }
}

static void test_dynamic_slices(void) {
  static const iron_dtype_t kIdx[] = {IRON_DTYPE_S32, IRON_DTYPE_U8,
                                      IRON_DTYPE_S64, IRON_DTYPE_U32,
                                      IRON_DTYPE_S16};
  for (int iter = 0; iter < 300; ++iter) {
    int rank = (int)ht_rand_range(0, 4);
    int64_t in_dims[IRON_MAX_RANK], sz[IRON_MAX_RANK], start[IRON_MAX_RANK];
    int64_t clamped[IRON_MAX_RANK];
    rand_dims(rank, in_dims, 6);
    iron_dtype_t idt = kIdx[ht_rand() % 5];
    bool is_unsigned = iron_dtype_is_unsigned_int(idt);
    for (int i = 0; i < rank; ++i) {
      sz[i] = ht_rand_range(0, in_dims[i]);
      start[i] = ht_rand_range(is_unsigned ? 0 : -3, in_dims[i] + 3);
      int64_t hi = in_dims[i] - sz[i];
      clamped[i] = start[i] < 0 ? 0 : start[i] > hi ? hi : start[i];
    }
    iron_dtype_t dt = rand_dtype();
    // dynamic_slice
    ht_op_t b;
    ht_init(&b, IRON_OP_DYNAMIC_SLICE);
    ht_operand(&b, dt, rank, in_dims);
    iron_tensor_t *ins[HT_MAX];
    ins[0] = ht_tensor(dt, rank, in_dims);
    ht_fill_bytes(ins[0]);
    for (int i = 0; i < rank; ++i) {
      ht_operand(&b, idt, 0, NULL);
      ins[1 + i] = ht_tensor(idt, 0, NULL);
      store_index(ins[1 + i], start[i]);
    }
    ht_result(&b, dt, rank, sz);
    ht_attr_i64(&b, "slice_sizes", rank, sz);
    iron_tensor_t *out = ht_tensor(dt, rank, sz);
    CHECK_OK(ht_run(&b, g_pool, NULL, ins, &out));
    int bad = 0;
    for (int64_t f = 0; f < out->count; ++f) {
      int64_t oi[IRON_MAX_RANK];
      unravel(f, rank, sz, oi);
      for (int i = 0; i < rank; ++i) oi[i] += clamped[i];
      if (!elem_eq(out, f, ins[0], ravel(rank, in_dims, oi))) bad++;
    }
    CHECK_EQ_INT(bad, 0);

    // dynamic_update_slice: write `out` back, shifted, into a fresh operand
    ht_init(&b, IRON_OP_DYNAMIC_UPDATE_SLICE);
    ht_operand(&b, dt, rank, in_dims);
    ht_operand(&b, dt, rank, sz);
    iron_tensor_t *uins[HT_MAX];
    uins[0] = ins[0];
    uins[1] = ht_tensor(dt, rank, sz);
    ht_fill_bytes(uins[1]);
    for (int i = 0; i < rank; ++i) {
      ht_operand(&b, idt, 0, NULL);
      uins[2 + i] = ins[1 + i];
    }
    ht_result(&b, dt, rank, in_dims);
    iron_tensor_t *res = ht_tensor(dt, rank, in_dims);
    CHECK_OK(ht_run(&b, g_pool, NULL, uins, &res));
    bad = 0;
    for (int64_t f = 0; f < res->count; ++f) {
      int64_t ii[IRON_MAX_RANK], ui[IRON_MAX_RANK];
      unravel(f, rank, in_dims, ii);
      bool inside = true;
      for (int i = 0; i < rank; ++i) {
        ui[i] = ii[i] - clamped[i];
        if (ui[i] < 0 || ui[i] >= sz[i]) inside = false;
      }
      if (inside ? !elem_eq(res, f, uins[1], ravel(rank, sz, ui))
                 : !elem_eq(res, f, ins[0], f))
        bad++;
    }
    CHECK_EQ_INT(bad, 0);
    // In place (output aliases operand 0) gives the same result.
    CHECK_OK(ht_run(&b, g_pool, NULL, uins, &uins[0]));
    CHECK(memcmp(uins[0]->data, res->data, res->nbytes) == 0);

    ht_tensor_free(res);
    ht_tensor_free(uins[1]);
    ht_tensor_free(out);
    for (int i = 0; i <= rank; ++i) ht_tensor_free(ins[i]);
  }
}

static void test_concatenate(void) {
  for (int iter = 0; iter < 200; ++iter) {
    int rank = (int)ht_rand_range(1, 4);
    int64_t dims[IRON_MAX_RANK];
    rand_dims(rank, dims, 4);
    int64_t dim = ht_rand_range(0, rank - 1);
    int n = (int)ht_rand_range(1, 4);
    iron_dtype_t dt = rand_dtype();
    ht_op_t b;
    ht_init(&b, IRON_OP_CONCATENATE);
    iron_tensor_t *ins[HT_MAX];
    int64_t starts[HT_MAX], total = 0;
    for (int k = 0; k < n; ++k) {
      int64_t d[IRON_MAX_RANK];
      memcpy(d, dims, sizeof(d));
      d[dim] = ht_rand_range(0, 4);
      starts[k] = total;
      total += d[dim];
      ht_operand(&b, dt, rank, d);
      ins[k] = ht_tensor(dt, rank, d);
      ht_fill_bytes(ins[k]);
    }
    int64_t od[IRON_MAX_RANK];
    memcpy(od, dims, sizeof(od));
    od[dim] = total;
    ht_result(&b, dt, rank, od);
    ht_attr_i64(&b, "dimension", 1, &dim);
    iron_tensor_t *out = ht_tensor(dt, rank, od);
    CHECK_OK(ht_run(&b, g_pool, NULL, ins, &out));
    int bad = 0;
    for (int64_t f = 0; f < out->count; ++f) {
      int64_t oi[IRON_MAX_RANK];
      unravel(f, rank, od, oi);
      int k = n - 1;
      while (oi[dim] < starts[k]) k--;
      oi[dim] -= starts[k];
      if (!elem_eq(out, f, ins[k], ravel(rank, ins[k]->dims, oi))) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    ht_tensor_free(out);
    for (int k = 0; k < n; ++k) ht_tensor_free(ins[k]);
  }
}

static void test_pad(void) {
  for (int iter = 0; iter < 300; ++iter) {
    int rank = (int)ht_rand_range(0, 3);
    int64_t in_dims[IRON_MAX_RANK], lo[IRON_MAX_RANK], hi[IRON_MAX_RANK];
    int64_t ip[IRON_MAX_RANK], od[IRON_MAX_RANK];
    rand_dims(rank, in_dims, 5);
    for (int i = 0; i < rank; ++i) {
      ip[i] = ht_rand_range(0, 2);
      int64_t base = in_dims[i] == 0 ? 0 : in_dims[i] + (in_dims[i] - 1) * ip[i];
      lo[i] = ht_rand_range(-base, 3);
      hi[i] = ht_rand_range(-(base + lo[i] < 0 ? 0 : base + lo[i]), 3);
      od[i] = lo[i] + hi[i] + base;
    }
    iron_dtype_t dt = rand_dtype();
    ht_op_t b;
    ht_init(&b, IRON_OP_PAD);
    ht_operand(&b, dt, rank, in_dims);
    ht_operand(&b, dt, 0, NULL);
    ht_result(&b, dt, rank, od);
    ht_attr_i64(&b, "edge_padding_low", rank, lo);
    ht_attr_i64(&b, "edge_padding_high", rank, hi);
    ht_attr_i64(&b, "interior_padding", rank, ip);
    iron_tensor_t *ins[2] = {ht_tensor(dt, rank, in_dims),
                             ht_tensor(dt, 0, NULL)};
    ht_fill_bytes(ins[0]);
    ht_fill_bytes(ins[1]);
    iron_tensor_t *out = ht_tensor(dt, rank, od);
    CHECK_OK(ht_run(&b, g_pool, NULL, ins, &out));
    int bad = 0;
    for (int64_t f = 0; f < out->count; ++f) {
      int64_t oi[IRON_MAX_RANK], ii[IRON_MAX_RANK];
      unravel(f, rank, od, oi);
      bool from_in = true;
      for (int i = 0; i < rank; ++i) {
        int64_t q = oi[i] - lo[i];
        if (q < 0 || q % (ip[i] + 1) != 0 || q / (ip[i] + 1) >= in_dims[i])
          from_in = false;
        else
          ii[i] = q / (ip[i] + 1);
      }
      if (from_in ? !elem_eq(out, f, ins[0], ravel(rank, in_dims, ii))
                  : !elem_eq(out, f, ins[1], 0))
        bad++;
    }
    CHECK_EQ_INT(bad, 0);
    ht_tensor_free(out);
    ht_tensor_free(ins[0]);
    ht_tensor_free(ins[1]);
  }
}

static void test_iota(void) {
  static const iron_dtype_t kIota[] = {IRON_DTYPE_S32, IRON_DTYPE_U8,
                                       IRON_DTYPE_F32, IRON_DTYPE_BF16,
                                       IRON_DTYPE_F64, IRON_DTYPE_S64};
  for (int iter = 0; iter < 60; ++iter) {
    int rank = (int)ht_rand_range(1, 4);
    int64_t dims[IRON_MAX_RANK];
    rand_dims(rank, dims, 6);
    int64_t d = ht_rand_range(0, rank - 1);
    iron_dtype_t dt = kIota[iter % 6];
    ht_op_t b;
    ht_init(&b, IRON_OP_IOTA);
    ht_result(&b, dt, rank, dims);
    ht_attr_i64(&b, "iota_dimension", 1, &d);
    iron_tensor_t *out = ht_tensor(dt, rank, dims);
    CHECK_OK(ht_run(&b, g_pool, NULL, NULL, &out));
    int bad = 0;
    for (int64_t f = 0; f < out->count; ++f) {
      int64_t oi[IRON_MAX_RANK];
      unravel(f, rank, dims, oi);
      double v = 0;
      switch (dt) {
        case IRON_DTYPE_S32: v = ((int32_t *)out->data)[f]; break;
        case IRON_DTYPE_U8: v = ((uint8_t *)out->data)[f]; break;
        case IRON_DTYPE_F32: v = ((float *)out->data)[f]; break;
        case IRON_DTYPE_BF16:
          v = iron_bf16_to_f32(((uint16_t *)out->data)[f]);
          break;
        case IRON_DTYPE_F64: v = ((double *)out->data)[f]; break;
        default: v = (double)((int64_t *)out->data)[f]; break;
      }
      if (v != (double)oi[d]) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    ht_tensor_free(out);
  }
}

static void test_refusals(void) {
  // Mismatched permutation is an error, not a crash.
  int64_t d[2] = {2, 3}, p[2] = {0, 0};
  ht_op_t b;
  ht_init(&b, IRON_OP_TRANSPOSE);
  ht_operand(&b, IRON_DTYPE_F32, 2, d);
  ht_result(&b, IRON_DTYPE_F32, 2, d);
  ht_attr_i64(&b, "permutation", 2, p);
  void *params = NULL;
  iron_status_t st =
      iron_host_kernel_lookup(IRON_OP_TRANSPOSE)->prepare(&b.op, NULL, &params);
  CHECK(st != IRON_OK);
  iron_status_free(st);
  free(params);
}

static void setup(void) { CHECK_OK(iron_threadpool_create(2, &g_pool)); }
static void teardown(void) { iron_threadpool_destroy(g_pool); }

static const iron_test_case_t kTests[] = {
    {"setup", setup},
    {"transpose", test_transpose},
    {"broadcast_in_dim", test_broadcast_in_dim},
    {"slice_reverse_reshape", test_slice_reverse_reshape},
    {"dynamic_slices", test_dynamic_slices},
    {"concatenate", test_concatenate},
    {"pad", test_pad},
    {"iota", test_iota},
    {"refusals", test_refusals},
    {"teardown", teardown},
};
IRON_TEST_MAIN(kTests)
