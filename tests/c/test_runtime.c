// Runtime basics: runtime/devices, events, buffers (strides, to_host,
// copy_to_device, host_pointer, accounting).
#include <pthread.h>
#include <unistd.h>

#include "iron/iron.h"
#include "runtime/runtime_internal.h"
#include "test.h"

// The out-of-memory test asks for absurd sizes on purpose: under ASan the
// allocator must return NULL instead of aborting.
const char *__asan_default_options(void);
__attribute__((visibility("default"), used)) const char *
__asan_default_options(void) {
  return "allocator_may_return_null=1";
}
const char *__tsan_default_options(void);
__attribute__((visibility("default"), used)) const char *
__tsan_default_options(void) {
  return "allocator_may_return_null=1";
}

static iron_runtime_t *make_rt(void) {
  iron_runtime_t *rt = NULL;
  CHECK_OK(iron_runtime_create(NULL, &rt));
  return rt;
}

static void test_runtime_devices(void) {
  iron_runtime_t *rt = make_rt();
  CHECK_EQ_INT(iron_runtime_device_count(rt), 1);
  iron_device_t *d = iron_runtime_device(rt, 0);
  CHECK(d != NULL);
  CHECK(strcmp(iron_device_kind(d), "host") == 0);
  CHECK_EQ_INT(iron_device_id(d), 0);
  CHECK(iron_runtime_device(rt, 1) == NULL);
  CHECK_EQ_INT(iron_device_bytes_in_use(d), 0);
  iron_runtime_release(rt);
}

static int g_cb_count;
static iron_status_code_t g_cb_code;
static void count_cb(iron_status_t st, void *arg) {
  (void)arg;
  g_cb_count++;
  g_cb_code = iron_status_code(st);
  iron_status_free(st);
}

static void *complete_later(void *arg) {
  usleep(20000);
  iron_event_complete((iron_event_t *)arg,
                      IRON_ERR(INTERNAL, "late failure"));
  return NULL;
}

static void test_events(void) {
  iron_event_t *ev;
  CHECK_OK(iron_event_create(&ev));
  CHECK(!iron_event_is_ready(ev));
  CHECK(iron_event_status(ev) == IRON_OK);
  g_cb_count = 0;
  iron_event_on_ready(ev, count_cb, NULL);  // before completion
  CHECK_EQ_INT(g_cb_count, 0);
  iron_event_complete(ev, IRON_OK);
  CHECK_EQ_INT(g_cb_count, 1);
  CHECK_EQ_INT(g_cb_code, IRON_STATUS_OK);
  iron_event_complete(ev, IRON_ERR(INTERNAL, "ignored"));  // second: ignored
  CHECK(iron_event_is_ready(ev));
  CHECK(iron_event_wait(ev) == IRON_OK);
  iron_event_on_ready(ev, count_cb, NULL);  // after completion: immediate
  CHECK_EQ_INT(g_cb_count, 2);
  iron_event_release(ev);

  // Error completion from another thread; wait blocks until then.
  CHECK_OK(iron_event_create(&ev));
  g_cb_count = 0;
  iron_event_on_ready(ev, count_cb, NULL);
  pthread_t th;
  pthread_create(&th, NULL, complete_later, ev);
  iron_status_t st = iron_event_wait(ev);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INTERNAL);
  CHECK(strstr(iron_status_message(st), "late failure") != NULL);
  iron_status_free(st);
  pthread_join(th, NULL);
  CHECK_EQ_INT(g_cb_count, 1);
  CHECK_EQ_INT(g_cb_code, IRON_STATUS_INTERNAL);
  st = iron_event_status(ev);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INTERNAL);
  iron_status_free(st);
  iron_event_release(ev);
}

static void read_back(iron_buffer_t *b, void *dst, size_t n) {
  iron_event_t *done = NULL;
  CHECK_OK(iron_buffer_to_host(b, dst, n, &done));
  if (done) {
    CHECK_OK(iron_event_wait(done));
    iron_event_release(done);
  }
}

static void test_buffer_dense(void) {
  iron_runtime_t *rt = make_rt();
  iron_device_t *d = iron_runtime_device(rt, 0);
  float x[6] = {1, 2, 3, 4, 5, 6};
  int64_t dims[2] = {2, 3};
  iron_buffer_t *b;
  CHECK_OK(iron_buffer_create_from_host(d, IRON_DTYPE_F32, 2, dims, x, NULL,
                                        &b));
  CHECK_EQ_INT(iron_buffer_rank(b), 2);
  CHECK_EQ_INT(iron_buffer_dims(b)[1], 3);
  CHECK_EQ_INT(iron_buffer_dtype(b), IRON_DTYPE_F32);
  CHECK_EQ_INT(iron_buffer_size_in_bytes(b), 24);
  CHECK(iron_device_bytes_in_use(d) >= 24);
  CHECK(iron_buffer_device(b) == d);
  iron_event_t *r = iron_buffer_ready_event(b);
  CHECK(iron_event_is_ready(r));
  iron_event_release(r);
  float *hp = iron_buffer_host_pointer(b);
  CHECK(hp != NULL && ((uintptr_t)hp % 64) == 0);
  CHECK(hp && hp[5] == 6.0f);
  float y[6] = {0};
  read_back(b, y, sizeof(y));
  CHECK(memcmp(x, y, sizeof(x)) == 0);
  // Wrong destination size.
  iron_event_t *done = NULL;
  iron_status_t st = iron_buffer_to_host(b, y, 20, &done);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INVALID_ARGUMENT);
  iron_status_free(st);
  // Copy to the same device shares the bytes; contents equal.
  iron_buffer_t *c;
  CHECK_OK(iron_buffer_copy_to_device(b, d, &c));
  iron_event_t *cr = iron_buffer_ready_event(c);
  CHECK_OK(iron_event_wait(cr));
  iron_event_release(cr);
  memset(y, 0, sizeof(y));
  read_back(c, y, sizeof(y));
  CHECK(memcmp(x, y, sizeof(x)) == 0);
  iron_buffer_release(b);
  iron_buffer_release(c);
  CHECK_EQ_INT(iron_device_bytes_in_use(d), 0);
  // Bad shapes.
  int64_t bad[1] = {-1};
  st = iron_buffer_create_from_host(d, IRON_DTYPE_F32, 1, bad, x, NULL, &b);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INVALID_ARGUMENT);
  iron_status_free(st);
  // Zero-size and scalar.
  int64_t z[1] = {0};
  CHECK_OK(iron_buffer_create_from_host(d, IRON_DTYPE_F32, 1, z, NULL, NULL,
                                        &b));
  CHECK_EQ_INT(iron_buffer_size_in_bytes(b), 0);
  read_back(b, NULL, 0);
  iron_buffer_release(b);
  int32_t s = 7, s2 = 0;
  CHECK_OK(iron_buffer_create_from_host(d, IRON_DTYPE_S32, 0, NULL, &s, NULL,
                                        &b));
  read_back(b, &s2, 4);
  CHECK_EQ_INT(s2, 7);
  iron_buffer_release(b);
  iron_runtime_release(rt);
}

static void test_buffer_strides(void) {
  iron_runtime_t *rt = make_rt();
  iron_device_t *d = iron_runtime_device(rt, 0);
  // A 3x4 int32 matrix m[i][j] = 10*i + j.
  int32_t m[3][4];
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) m[i][j] = 10 * i + j;
  iron_buffer_t *b;
  // Transposed view: 4x3 with strides (4, 16).
  int64_t tdims[2] = {4, 3}, tstr[2] = {4, 16};
  CHECK_OK(iron_buffer_create_from_host(d, IRON_DTYPE_S32, 2, tdims, m, tstr,
                                        &b));
  int32_t out[12];
  read_back(b, out, sizeof(out));
  int ok = 1;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) ok &= out[j * 3 + i] == m[i][j];
  CHECK(ok);
  iron_buffer_release(b);
  // Negative strides: rows and columns reversed (start at the last element).
  int64_t ndims[2] = {3, 4}, nstr[2] = {-16, -4};
  CHECK_OK(iron_buffer_create_from_host(d, IRON_DTYPE_S32, 2, ndims,
                                        &m[2][3], nstr, &b));
  read_back(b, out, sizeof(out));
  ok = 1;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) ok &= out[i * 4 + j] == m[2 - i][3 - j];
  CHECK(ok);
  iron_buffer_release(b);
  // Zero stride (broadcast a row): 3x4 with strides (0, 4) from row 1.
  int64_t zstr[2] = {0, 4};
  CHECK_OK(iron_buffer_create_from_host(d, IRON_DTYPE_S32, 2, ndims, &m[1][0],
                                        zstr, &b));
  read_back(b, out, sizeof(out));
  ok = 1;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) ok &= out[i * 4 + j] == m[1][j];
  CHECK(ok);
  iron_buffer_release(b);
  // Zero stride everywhere: a scalar broadcast to 2x3x2 (u8).
  uint8_t v = 42, o8[12];
  int64_t bdims[3] = {2, 3, 2}, bstr[3] = {0, 0, 0};
  CHECK_OK(iron_buffer_create_from_host(d, IRON_DTYPE_U8, 3, bdims, &v, bstr,
                                        &b));
  read_back(b, o8, sizeof(o8));
  ok = 1;
  for (int i = 0; i < 12; ++i) ok &= o8[i] == 42;
  CHECK(ok);
  iron_buffer_release(b);
  // Dense strides given explicitly take the memcpy path.
  int64_t dstr[2] = {16, 4};
  CHECK_OK(iron_buffer_create_from_host(d, IRON_DTYPE_S32, 2, ndims, m, dstr,
                                        &b));
  read_back(b, out, sizeof(out));
  CHECK(memcmp(out, m, sizeof(out)) == 0);
  iron_buffer_release(b);
  // Padded rows: 3x2 taking columns 1..2 (strides 16, 4).
  int64_t pdims[2] = {3, 2};
  CHECK_OK(iron_buffer_create_from_host(d, IRON_DTYPE_S32, 2, pdims, &m[0][1],
                                        dstr, &b));
  int32_t p[6];
  read_back(b, p, sizeof(p));
  CHECK(p[0] == 1 && p[1] == 2 && p[2] == 11 && p[5] == 22);
  iron_buffer_release(b);
  CHECK_EQ_INT(iron_device_bytes_in_use(d), 0);
  iron_runtime_release(rt);
}

static void test_buffer_pending(void) {
  // A buffer whose contents arrive later: to_host and copy wait for it.
  iron_runtime_t *rt = make_rt();
  iron_device_t *d = iron_runtime_device(rt, 0);
  iron_event_t *ev = iron_event_new();
  int64_t dims[1] = {4};
  iron_buffer_t *b;
  CHECK_OK(iron_buffer_create_pending(d, IRON_DTYPE_F32, 1, dims, ev, &b));
  CHECK(iron_buffer_host_pointer(b) == NULL);
  float y[4] = {0};
  iron_event_t *done;
  CHECK_OK(iron_buffer_to_host(b, y, sizeof(y), &done));
  iron_buffer_t *c;
  CHECK_OK(iron_buffer_copy_to_device(b, d, &c));
  CHECK(!iron_event_is_ready(done));
  iron_storage_t *s;
  CHECK_OK(iron_storage_allocate(d, 16, &s));
  float x[4] = {1, 2, 3, 4};
  memcpy(s->data, x, 16);
  iron_buffer_set_storage(b, s);
  iron_event_complete(ev, IRON_OK);
  CHECK(iron_event_is_ready(done));
  CHECK_OK(iron_event_wait(done));
  CHECK(memcmp(x, y, 16) == 0);
  iron_event_release(done);
  float z[4] = {0};
  read_back(c, z, 16);
  CHECK(memcmp(x, z, 16) == 0);
  iron_buffer_release(c);
  iron_buffer_release(b);
  iron_event_release(ev);

  // A failed buffer: to_host reports the error.
  ev = iron_event_new();
  CHECK_OK(iron_buffer_create_pending(d, IRON_DTYPE_F32, 1, dims, ev, &b));
  CHECK_OK(iron_buffer_to_host(b, y, sizeof(y), &done));
  iron_event_complete(ev, IRON_ERR(INTERNAL, "kernel exploded"));
  iron_status_t st = iron_event_wait(done);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INTERNAL);
  iron_status_free(st);
  iron_event_release(done);
  iron_buffer_release(b);
  iron_event_release(ev);
  CHECK_EQ_INT(iron_device_bytes_in_use(d), 0);
  iron_runtime_release(rt);
}

static void test_out_of_memory(void) {
  iron_runtime_t *rt = make_rt();
  iron_device_t *d = iron_runtime_device(rt, 0);
  float x[4] = {1, 2, 3, 4};
  int64_t dims[1] = {4};
  iron_buffer_t *keep;
  CHECK_OK(iron_buffer_create_from_host(d, IRON_DTYPE_F32, 1, dims, x, NULL,
                                        &keep));
  int64_t before = iron_device_bytes_in_use(d);
  d->memory_limit = before + 1024;
  int64_t big[1] = {4096};
  float *src = calloc(4096, 4);
  iron_buffer_t *b = NULL;
  iron_status_t st =
      iron_buffer_create_from_host(d, IRON_DTYPE_F32, 1, big, src, NULL, &b);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_RESOURCE_EXHAUSTED);
  CHECK(strstr(iron_status_message(st), "16384 bytes") != NULL);
  iron_status_free(st);
  CHECK(b == NULL);
  CHECK_EQ_INT(iron_device_bytes_in_use(d), before);
  d->memory_limit = 0;
  // Real allocator failure (an absurd size) is also an error, not a crash.
  int64_t huge[2] = {1LL << 30, 1LL << 20};
  st = iron_buffer_create_from_host(d, IRON_DTYPE_F32, 2, huge, src, NULL, &b);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_RESOURCE_EXHAUSTED);
  iron_status_free(st);
  free(src);
  float y[4];
  read_back(keep, y, sizeof(y));
  CHECK(memcmp(x, y, 16) == 0);
  iron_buffer_release(keep);
  iron_runtime_release(rt);
}

static const iron_test_case_t kTests[] = {
    {"runtime_devices", test_runtime_devices},
    {"events", test_events},
    {"buffer_dense", test_buffer_dense},
    {"buffer_strides", test_buffer_strides},
    {"buffer_pending", test_buffer_pending},
    {"out_of_memory", test_out_of_memory},
};
IRON_TEST_MAIN(kTests)
