#include <pthread.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/dtype.h"
#include "base/half.h"
#include "base/status.h"
#include "base/threadpool.h"
#include "pjrt/pjrt_abi.h"
#include "test.h"

static iron_status_t fail_inner(void) {
  return IRON_ERR(INVALID_ARGUMENT, "bad value %d", 7);
}
static iron_status_t fail_outer(void) {
  IRON_RETURN_IF_ERROR(fail_inner(), "while doing %s", "outer");
  return IRON_OK;
}

static void test_status(void) {
  CHECK(iron_status_is_ok(IRON_OK));
  iron_status_t s = fail_outer();
  CHECK(s != NULL);
  CHECK_EQ_INT(iron_status_code(s), IRON_STATUS_INVALID_ARGUMENT);
  CHECK(strcmp(iron_status_message(s), "while doing outer: bad value 7") == 0);
  iron_status_t c = iron_status_clone(s);
  CHECK(strcmp(iron_status_message(c), iron_status_message(s)) == 0);
  iron_status_free(c);
  iron_status_free(s);
  CHECK(strcmp(iron_status_code_name(IRON_STATUS_UNIMPLEMENTED),
               "UNIMPLEMENTED") == 0);
}

static void test_arena(void) {
  iron_arena_t a;
  iron_arena_init(&a);
  for (int i = 0; i < 1000; ++i) {
    int *p = iron_arena_alloc(&a, (size_t)(i % 97) * 8 + 1);
    CHECK(p != NULL);
    CHECK(((uintptr_t)p & 15) == 0);
  }
  void *big = iron_arena_alloc(&a, 1 << 20);
  CHECK(big != NULL);
  CHECK(iron_arena_alloc_array(&a, SIZE_MAX / 2, 4) == NULL);
  char *s = iron_arena_strdup(&a, "hello");
  CHECK(strcmp(s, "hello") == 0);
  iron_arena_deinit(&a);
}

static void test_dtype(void) {
  CHECK_EQ_INT(iron_dtype_size(IRON_DTYPE_BF16), 2);
  CHECK_EQ_INT(iron_dtype_size(IRON_DTYPE_C128), 16);
  CHECK(strcmp(iron_dtype_name(IRON_DTYPE_F32), "f32") == 0);
  CHECK_EQ_INT(iron_dtype_to_pjrt(IRON_DTYPE_F32), 11);
  CHECK_EQ_INT(iron_dtype_from_pjrt(13), IRON_DTYPE_BF16);
  CHECK_EQ_INT(iron_dtype_from_pjrt(1), IRON_DTYPE_PRED);
  CHECK(iron_dtype_is_unsigned_int(IRON_DTYPE_U16));
  CHECK(iron_dtype_is_complex(IRON_DTYPE_C64));
  CHECK_EQ_INT(iron_dtype_bits(IRON_DTYPE_S4), 4);
  // Every dtype PJRT numbers maps to PJRT's value of the same name (the ABI
  // header's enum, taken from XLA's pjrt_c_api.h), both ways; f6 was 30/31
  // (PJRT's S1/U1) once.
  static const struct {
    iron_dtype_t dt;
    int pjrt;
  } kPjrt[] = {
#define P_(n) {IRON_DTYPE_##n, PJRT_Buffer_Type_##n}
      P_(PRED), P_(S2), P_(S4), P_(S8), P_(S16), P_(S32), P_(S64), P_(U2),
      P_(U4), P_(U8), P_(U16), P_(U32), P_(U64), P_(F16), P_(BF16), P_(F32),
      P_(F64), P_(C64), P_(C128), P_(F8E5M2), P_(F8E4M3FN),
      P_(F8E4M3B11FNUZ), P_(F8E5M2FNUZ), P_(F8E4M3FNUZ), P_(F8E4M3),
      P_(F8E3M4), P_(F8E8M0FNU), P_(F4E2M1FN), P_(F6E2M3FN), P_(F6E3M2FN),
      P_(TOKEN),
#undef P_
  };
  for (size_t i = 0; i < sizeof(kPjrt) / sizeof(kPjrt[0]); ++i) {
    CHECK_EQ_INT(iron_dtype_to_pjrt(kPjrt[i].dt), kPjrt[i].pjrt);
    CHECK_EQ_INT(iron_dtype_from_pjrt(kPjrt[i].pjrt), kPjrt[i].dt);
  }
  // PJRT's s1/u1 (jax's int1/uint1, which XLA:CPU cannot run either) have
  // no iron dtype.
  CHECK_EQ_INT(iron_dtype_from_pjrt(PJRT_Buffer_Type_S1), IRON_DTYPE_INVALID);
  CHECK_EQ_INT(iron_dtype_from_pjrt(PJRT_Buffer_Type_U1), IRON_DTYPE_INVALID);
}

static void test_half(void) {
  // Every f16 value round-trips through f32.
  int bad = 0;
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = iron_f16_to_f32((uint16_t)h);
    uint16_t back = iron_f32_to_f16(f);
    if (isnan(f)) {
      if ((back & 0x7c00) != 0x7c00 || (back & 0x3ff) == 0) bad++;
    } else if (back != h) {
      bad++;
    }
  }
  CHECK_EQ_INT(bad, 0);
  CHECK(iron_f32_to_f16(65520.0f) == 0x7c00);
  CHECK(iron_f32_to_f16(65519.0f) == 0x7bff);
  CHECK(iron_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
  CHECK(iron_f32_to_f16(ldexpf(1.0f, -25)) == 0);  // tie to even (0)
  CHECK(iron_f32_to_f16(ldexpf(1.5f, -25)) == 1);
  CHECK(iron_f32_to_bf16(1.0f) == 0x3f80);
  CHECK(iron_f32_to_bf16(iron_f32_from_bits(0x3f808000)) == 0x3f80);  // tie
  CHECK(iron_f32_to_bf16(iron_f32_from_bits(0x3f818000)) == 0x3f82);
  CHECK(iron_bf16_to_f32(0xff80) == -INFINITY);
  CHECK(isnan(iron_bf16_to_f32(iron_f32_to_bf16(NAN))));
}

typedef struct {
  int64_t *out;
} sum_arg_t;
static void fill_fn(void *arg, int64_t b, int64_t e) {
  sum_arg_t *a = arg;
  for (int64_t i = b; i < e; ++i) a->out[i] = i * 2;
}

static void test_threadpool(void) {
  iron_threadpool_t *pool = NULL;
  CHECK_OK(iron_threadpool_create(4, &pool));
  enum { N = 100000 };
  int64_t *out = calloc(N, sizeof(int64_t));
  for (int rep = 0; rep < 50; ++rep) {
    memset(out, 0, N * sizeof(int64_t));
    sum_arg_t a = {out};
    iron_threadpool_parallel_for(pool, N, 100, fill_fn, &a);
    int bad = 0;
    for (int64_t i = 0; i < N; ++i) bad += out[i] != i * 2;
    CHECK_EQ_INT(bad, 0);
  }
  free(out);
  iron_threadpool_destroy(pool);
}

static const iron_test_case_t kTests[] = {
    {"status", test_status},       {"arena", test_arena},
    {"dtype", test_dtype},         {"half", test_half},
    {"threadpool", test_threadpool},
};
IRON_TEST_MAIN(kTests)
