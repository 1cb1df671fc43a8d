// stablehlo.rng_bit_generator host kernel: bit-exact with XLA:CPU on the
// vectors that tests/gen_rng_vectors.py took from jax's CPU backend
// (tests/data/rng/vectors.txt), plus refusals of what XLA does not define.
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/host/host_kernel.h"
#include "test.h"

#ifndef IRON_TEST_DATA_DIR
#define IRON_TEST_DATA_DIR "tests/data"
#endif

// A one-op IR fragment on the stack: state -> (new state, bits).
typedef struct rng_op {
  iron_ir_type_t state_type, bits_type;
  iron_ir_value_t operand;
  iron_ir_value_t *operands[1];
  iron_ir_value_t results[2];
  iron_ir_attr_t alg_attr;
  iron_ir_named_attr_t attrs[1];
  iron_ir_op_t op;
} rng_op_t;

static void rng_op_init(rng_op_t *r, int32_t alg, iron_dtype_t state_dtype,
                        int64_t state_len, iron_dtype_t dtype, int32_t rank,
                        const int64_t *dims) {
  memset(r, 0, sizeof(*r));
  r->state_type.kind = IRON_TYPE_TENSOR;
  r->state_type.dtype = state_dtype;
  r->state_type.rank = 1;
  r->state_type.dims[0] = state_len;
  r->bits_type.kind = IRON_TYPE_TENSOR;
  r->bits_type.dtype = dtype;
  r->bits_type.rank = rank;
  for (int32_t i = 0; i < rank; ++i) r->bits_type.dims[i] = dims[i];
  r->operand.type = &r->state_type;
  r->operands[0] = &r->operand;
  r->results[0].type = &r->state_type;
  r->results[1].type = &r->bits_type;
  r->alg_attr.kind = IRON_ATTR_ENUM;
  r->alg_attr.enumv.kind = IRON_ENUM_RNG_ALGORITHM;
  r->alg_attr.enumv.value = alg;
  r->attrs[0].name = "rng_algorithm";
  r->attrs[0].value = &r->alg_attr;
  r->op.kind = IRON_OP_RNG_BIT_GENERATOR;
  r->op.name = "stablehlo.rng_bit_generator";
  r->op.num_operands = 1;
  r->op.operands = r->operands;
  r->op.num_results = 2;
  r->op.results = r->results;
  r->op.num_attrs = 1;
  r->op.attrs = r->attrs;
}

static iron_dtype_t dtype_from_name(const char *name) {
  for (int d = 1; d < IRON_DTYPE_COUNT; ++d)
    if (strcmp(iron_dtype_name((iron_dtype_t)d), name) == 0)
      return (iron_dtype_t)d;
  return IRON_DTYPE_INVALID;
}

static uint64_t fnv1a64(const void *data, size_t n) {
  const unsigned char *p = (const unsigned char *)data;
  uint64_t h = 0xCBF29CE484222325ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001B3ull;
  return h;
}

static void tensor_init(iron_tensor_t *t, const iron_ir_type_t *type,
                        void *data) {
  memset(t, 0, sizeof(*t));
  t->data = data;
  t->dtype = type->dtype;
  t->rank = type->rank;
  t->count = 1;
  for (int32_t i = 0; i < type->rank; ++i) {
    t->dims[i] = type->dims[i];
    t->count *= type->dims[i];
  }
  t->nbytes = (size_t)t->count * iron_dtype_size(type->dtype);
}

// Runs one case; returns false (after reporting) on any mismatch.
static bool run_case(iron_threadpool_t *pool, int32_t alg, iron_dtype_t dtype,
                     int32_t rank, const int64_t *dims, int64_t state_len,
                     const uint64_t *state, const uint64_t *want_state,
                     int64_t want_count, uint64_t want_fnv,
                     const uint64_t *want_first, int num_first,
                     int line_no) {
  rng_op_t r;
  rng_op_init(&r, alg, IRON_DTYPE_U64, state_len, dtype, rank, dims);
  const iron_kernel_t *k =
      iron_host_kernel_lookup(IRON_OP_RNG_BIT_GENERATOR);
  void *params = NULL;
  iron_status_t s = k->prepare(&r.op, NULL, &params);
  if (s) {
    fprintf(stderr, "line %d: prepare: %s\n", line_no,
            iron_status_message(s));
    iron_status_free(s);
    return false;
  }
  size_t esize = iron_dtype_size(dtype);
  void *bits = calloc((size_t)(want_count > 0 ? want_count : 1), esize);
  uint64_t in_state[3], out_state[3] = {0, 0, 0};
  memcpy(in_state, state, sizeof(uint64_t) * (size_t)state_len);
  iron_tensor_t tin, tstate, tbits;
  tensor_init(&tin, &r.state_type, in_state);
  tensor_init(&tstate, &r.state_type, out_state);
  tensor_init(&tbits, &r.bits_type, bits);
  const iron_tensor_t *ins[1] = {&tin};
  iron_tensor_t *outs[2] = {&tstate, &tbits};
  iron_kernel_ctx_t ctx = {.pool = pool};
  s = k->run(&ctx, params, ins, outs);
  bool ok = s == IRON_OK && tbits.count == want_count;
  if (s) {
    fprintf(stderr, "line %d: run: %s\n", line_no, iron_status_message(s));
    iron_status_free(s);
  }
  if (ok) {
    for (int64_t i = 0; i < state_len; ++i)
      if (out_state[i] != want_state[i]) ok = false;
    if (!ok)
      fprintf(stderr, "line %d: state %" PRIx64 " %" PRIx64 "\n", line_no,
              out_state[0], out_state[1]);
  }
  if (ok) {
    for (int i = 0; i < num_first; ++i) {
      uint64_t v = 0;
      memcpy(&v, (char *)bits + (size_t)i * esize, esize);  // little endian
      if (v != want_first[i]) {
        fprintf(stderr, "line %d: element %d: %" PRIx64 " want %" PRIx64 "\n",
                line_no, i, v, want_first[i]);
        ok = false;
      }
    }
    if (ok && fnv1a64(bits, (size_t)want_count * esize) != want_fnv) {
      fprintf(stderr, "line %d: hash mismatch\n", line_no);
      ok = false;
    }
  }
  free(bits);
  free(params);
  return ok;
}

static void run_vector_file(iron_threadpool_t *pool, int *out_cases) {
  const char *path = IRON_TEST_DATA_DIR "/rng/vectors.txt";
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  if (!f) return;
  char line[4096];
  int line_no = 0, cases = 0;
  int32_t alg = 0, rank = 0;
  int64_t dims[IRON_MAX_RANK], state_len = 0;
  uint64_t state[3], new_state[3];
  char dtype_name[32];
  while (fgets(line, sizeof(line), f)) {
    line_no++;
    char *p = line, *end;
    if (strncmp(p, "case ", 5) == 0) {
      p += 5;
      alg = (int32_t)strtol(p, &end, 10), p = end;
      int n = 0;
      CHECK(sscanf(p, " %31s%n", dtype_name, &n) == 1);
      p += n;
      rank = (int32_t)strtol(p, &end, 10), p = end;
      for (int32_t i = 0; i < rank; ++i) dims[i] = strtoll(p, &end, 10), p = end;
      state_len = strtoll(p, &end, 10), p = end;
      for (int64_t i = 0; i < state_len; ++i)
        state[i] = strtoull(p, &end, 16), p = end;
    } else if (strncmp(p, "state ", 6) == 0) {
      p += 6;
      for (int64_t i = 0; i < state_len; ++i)
        new_state[i] = strtoull(p, &end, 16), p = end;
    } else if (strncmp(p, "bits ", 5) == 0) {
      p += 5;
      int64_t count = strtoll(p, &end, 10);
      p = end;
      uint64_t fnv = strtoull(p, &end, 16);
      p = end;
      uint64_t first[4];
      int nf = 0;
      while (nf < 4) {
        uint64_t v = strtoull(p, &end, 16);
        if (end == p) break;
        first[nf++] = v;
        p = end;
      }
      iron_dtype_t dt = dtype_from_name(dtype_name);
      CHECK(dt != IRON_DTYPE_INVALID);
      bool ok = run_case(pool, alg, dt, rank, dims, state_len, state,
                         new_state, count, fnv, first, nf, line_no);
      CHECK(ok);
      cases++;
    }
  }
  fclose(f);
  *out_cases = cases;
}

static void test_vectors_single_thread(void) {
  int cases = 0;
  run_vector_file(NULL, &cases);
  CHECK(cases > 1400);  // the file is all there
}

static void test_vectors_threaded(void) {
  iron_threadpool_t *pool = NULL;
  CHECK_OK(iron_threadpool_create(4, &pool));
  int cases = 0;
  run_vector_file(pool, &cases);
  CHECK(cases > 1400);
  iron_threadpool_destroy(pool);
}

// The state output may alias the state input (inplace_ok).
static void test_inplace_state(void) {
  int64_t dims[1] = {5};
  rng_op_t r;
  rng_op_init(&r, IRON_RNG_THREE_FRY, IRON_DTYPE_U64, 2, IRON_DTYPE_U32, 1,
              dims);
  const iron_kernel_t *k =
      iron_host_kernel_lookup(IRON_OP_RNG_BIT_GENERATOR);
  CHECK(k->inplace_ok);
  void *params = NULL;
  CHECK_OK(k->prepare(&r.op, NULL, &params));
  uint64_t st[2] = {1, 2}, st2[2] = {1, 2}, fresh[2];
  uint32_t a[5], b[5];
  iron_tensor_t tin, tout, tb;
  tensor_init(&tin, &r.state_type, st);
  tensor_init(&tb, &r.bits_type, a);
  const iron_tensor_t *ins[1] = {&tin};
  iron_tensor_t *outs[2] = {&tin, &tb};
  CHECK_OK(k->run(NULL, params, ins, outs));
  tensor_init(&tin, &r.state_type, st2);
  tensor_init(&tout, &r.state_type, fresh);
  tensor_init(&tb, &r.bits_type, b);
  outs[0] = &tout;
  CHECK_OK(k->run(NULL, params, ins, outs));
  CHECK(memcmp(st, fresh, sizeof(st)) == 0);
  CHECK(memcmp(a, b, sizeof(a)) == 0);
  free(params);
}

static void expect_refused(int32_t alg, iron_dtype_t state_dtype,
                           int64_t state_len, iron_dtype_t dtype) {
  int64_t dims[1] = {4};
  rng_op_t r;
  rng_op_init(&r, alg, state_dtype, state_len, dtype, 1, dims);
  void *params = NULL;
  iron_status_t s = iron_host_kernel_lookup(IRON_OP_RNG_BIT_GENERATOR)
                        ->prepare(&r.op, NULL, &params);
  CHECK(s != IRON_OK);
  CHECK(params == NULL);
  iron_status_free(s);
}

static void test_refusals(void) {
  expect_refused(IRON_RNG_THREE_FRY, IRON_DTYPE_U64, 3, IRON_DTYPE_U32);
  expect_refused(IRON_RNG_PHILOX, IRON_DTYPE_U64, 4, IRON_DTYPE_U32);
  expect_refused(IRON_RNG_PHILOX, IRON_DTYPE_U32, 4, IRON_DTYPE_U32);
  expect_refused(IRON_RNG_THREE_FRY, IRON_DTYPE_U64, 2, IRON_DTYPE_C64);
  expect_refused(IRON_RNG_THREE_FRY, IRON_DTYPE_U64, 2, IRON_DTYPE_F4E2M1FN);
  expect_refused(IRON_RNG_THREE_FRY, IRON_DTYPE_U64, 2, IRON_DTYPE_PRED);
  expect_refused(IRON_RNG_PHILOX, IRON_DTYPE_U64, 2, IRON_DTYPE_U4);
  expect_refused(7, IRON_DTYPE_U64, 2, IRON_DTYPE_U32);
}

static const iron_test_case_t kTests[] = {
    {"vectors_single_thread", test_vectors_single_thread},
    {"vectors_threaded", test_vectors_threaded},
    {"inplace_state", test_inplace_state},
    {"refusals", test_refusals},
};
IRON_TEST_MAIN(kTests)
