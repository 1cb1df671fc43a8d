// The CUDA loader and device selection without a GPU: missing libraries and
// symbols are reported by name with the places searched, the toolkit's stub
// libcuda is never taken for a driver, and runtime creation honours
// IRON_DEVICE. On a machine with a working GPU driver the "no GPU" checks
// are replaced by checks that CUDA was found (see gpu_present()).
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device/cuda/cuda_api.h"
#include "device/cuda/cuda_device.h"
#include "iron/iron.h"
#include "test.h"

#define STUB_LIBCUDA "/usr/local/cuda/lib64/stubs/libcuda.so"

static bool gpu_present(void) { return iron_cuda_device_count(NULL) > 0; }

static bool contains(const char *s, const char *sub) {
  return s && strstr(s, sub) != NULL;
}

static void test_bogus_paths(void) {
  iron_cuda_api_t api;
  iron_cuda_api_load_from("/nonexistent/a/libcuda.so.1",
                          "/nonexistent/b/libnvrtc.so",
                          "/nonexistent/c/libcublasLt.so", &api);
  CHECK(!api.has_driver && !api.has_nvrtc && !api.has_cublaslt);
  CHECK(contains(api.driver_error, "libcuda"));
  CHECK(contains(api.driver_error, "/nonexistent/a/libcuda.so.1"));
  CHECK(contains(api.nvrtc_error, "libnvrtc"));
  CHECK(contains(api.nvrtc_error, "/nonexistent/b/libnvrtc.so"));
  CHECK(contains(api.cublaslt_error, "libcublasLt"));
  CHECK(contains(api.cublaslt_error, "/nonexistent/c/libcublasLt.so"));
  CHECK(api.cuInit == NULL && api.nvrtcVersion == NULL);
  iron_status_t st = iron_cuda_api_require(&api);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_FAILED_PRECONDITION);
  const char *msg = iron_status_message(st);
  CHECK(contains(msg, "libcuda"));
  CHECK(contains(msg, "libnvrtc"));
  CHECK(contains(msg, "libcublasLt"));
  CHECK(contains(msg, "/nonexistent/b/libnvrtc.so"));
  iron_status_free(st);
}

static void test_missing_symbol(void) {
  // libm is a real library without any of our symbols.
  iron_cuda_api_t api;
  iron_cuda_api_load_from("libm.so.6", "libm.so.6", "libm.so.6", &api);
  CHECK(!api.has_driver && !api.has_nvrtc && !api.has_cublaslt);
  CHECK(contains(api.driver_error, "lacks the symbol cuInit"));
  CHECK(contains(api.nvrtc_error, "lacks the symbol nvrtcVersion"));
  CHECK(contains(api.cublaslt_error, "lacks the symbol cublasLtGetVersion"));
  CHECK(contains(api.driver_error, "libm.so.6"));
  iron_status_t st = iron_cuda_api_require(&api);
  CHECK(contains(iron_status_message(st), "lacks the symbol cuInit"));
  iron_status_free(st);
}

static void test_search_order_message(void) {
  // IRON_CUDA_LIB_DIR comes first and every place searched is named.
  setenv("IRON_CUDA_LIB_DIR", "/nonexistent/iron-cuda-dir", 1);
  iron_cuda_api_t api;
  iron_cuda_api_load_from(NULL, NULL, NULL, &api);
  unsetenv("IRON_CUDA_LIB_DIR");
  if (!gpu_present()) {
    CHECK(!api.has_driver);
    CHECK(contains(api.driver_error, "libcuda.so.1"));
    CHECK(contains(api.driver_error, "/nonexistent/iron-cuda-dir"));
    CHECK(contains(api.driver_error, "system loader path"));
    CHECK(contains(api.driver_error, "/usr/local/cuda/lib64"));
    CHECK(contains(api.driver_error, "IRON_CUDA_LIB_DIR"));
    // IRON_CUDA_LIB_DIR is listed before the loader path.
    CHECK(strstr(api.driver_error, "/nonexistent/iron-cuda-dir") <
          strstr(api.driver_error, "system loader path"));
  }
  // The toolkit is installed wherever these tests run (NVRTC compiles are
  // tested GPU-free), so NVRTC and cuBLASLt are found by the default search.
  CHECK(api.has_nvrtc);
  CHECK(api.has_cublaslt);
  CHECK(api.nvrtc_path[0] != '\0' && api.nvrtc_error[0] == '\0');
  if (api.has_nvrtc) {
    int major = 0, minor = 0;
    CHECK_EQ_INT(api.nvrtcVersion(&major, &minor), 0);
    CHECK(major >= 12);
  }
}

static void test_stub_driver(void) {
  // The stub exports the driver API but is no driver: cuInit fails, and the
  // failure reads as a status naming the call.
  if (access(STUB_LIBCUDA, R_OK) != 0 && gpu_present()) {
    // A GPU machine need not have the toolkit (wheels suffice); CI has it.
    fprintf(stderr, "stub_driver: no %s here, not exercised\n", STUB_LIBCUDA);
    return;
  }
  CHECK(access(STUB_LIBCUDA, R_OK) == 0);
  iron_cuda_api_t api;
  iron_cuda_api_load_from(STUB_LIBCUDA, NULL, NULL, &api);
  CHECK(api.has_driver);
  if (!api.has_driver) return;
  CUresult r = api.cuInit(0);
  CHECK(r != IRON_CU_SUCCESS);
  iron_status_t st = iron_cuda_status(&api, r, "cuInit");
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INTERNAL);
  CHECK(contains(iron_status_message(st), "cuInit: "));
  if (r == 34) CHECK(contains(iron_status_message(st), "stub"));
  iron_status_free(st);
  // The default search never reaches the stubs directory.
  const iron_cuda_api_t *g = iron_cuda_api_get();
  CHECK(!contains(g->driver_path, "stubs"));
}

static void test_status(void) {
  iron_status_t st = iron_cuda_status(NULL, IRON_CU_SUCCESS, "x");
  CHECK(st == IRON_OK);
  st = iron_cuda_status(NULL, IRON_CU_ERROR_OUT_OF_MEMORY, "cuMemAlloc");
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_RESOURCE_EXHAUSTED);
  CHECK(contains(iron_status_message(st), "cuMemAlloc: CUresult 2"));
  iron_status_free(st);
  st = iron_cuda_status(NULL, 700, "cuStreamSynchronize");
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INTERNAL);
  CHECK(contains(iron_status_message(st), "CUresult 700"));
  iron_status_free(st);
}

static void test_device_count(void) {
  const char *reason = "unset";
  int n = iron_cuda_device_count(&reason);
  if (gpu_present()) {
    CHECK(n > 0 && reason == NULL);
    return;
  }
  CHECK_EQ_INT(n, 0);
  CHECK(reason != NULL && reason[0] != '\0');
  CHECK(contains(reason, "libcuda"));
  // Creating a device says the same.
  iron_device_t *dev = NULL;
  iron_status_t st = iron_cuda_device_create(NULL, 0, 0, &dev);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_FAILED_PRECONDITION);
  CHECK(contains(iron_status_message(st), "libcuda"));
  CHECK(dev == NULL);
  iron_status_free(st);
}

static void test_runtime_selection(void) {
  const char *saved = getenv("IRON_DEVICE");
  char *keep = saved ? strdup(saved) : NULL;
  iron_runtime_t *rt = NULL;

  setenv("IRON_DEVICE", "host", 1);
  CHECK_OK(iron_runtime_create(NULL, &rt));
  if (rt) {
    CHECK_EQ_INT(iron_runtime_device_count(rt), 1);
    iron_device_t *d = iron_runtime_device(rt, 0);
    CHECK(strcmp(iron_device_kind(d), "host") == 0);
    CHECK(strcmp(iron_device_description(d), "host") == 0);
    iron_runtime_release(rt);
    rt = NULL;
  }

  setenv("IRON_DEVICE", "tpu", 1);
  iron_status_t st = iron_runtime_create(NULL, &rt);
  CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_INVALID_ARGUMENT);
  CHECK(contains(iron_status_message(st), "IRON_DEVICE=tpu"));
  CHECK(rt == NULL);
  iron_status_free(st);

  setenv("IRON_DEVICE", "cuda", 1);
  st = iron_runtime_create(NULL, &rt);
  if (gpu_present()) {
    CHECK(st == IRON_OK);
    if (rt) {
      CHECK(strcmp(iron_device_kind(iron_runtime_device(rt, 0)), "cuda") == 0);
      iron_runtime_release(rt);
      rt = NULL;
    }
  } else {
    CHECK_EQ_INT(iron_status_code(st), IRON_STATUS_FAILED_PRECONDITION);
    CHECK(contains(iron_status_message(st), "IRON_DEVICE=cuda"));
    CHECK(contains(iron_status_message(st), "libcuda"));
    CHECK(rt == NULL);
  }
  iron_status_free(st);

  // Unset: the host when there is no GPU, as before CUDA existed.
  unsetenv("IRON_DEVICE");
  CHECK_OK(iron_runtime_create(NULL, &rt));
  if (rt) {
    CHECK(strcmp(iron_device_kind(iron_runtime_device(rt, 0)),
                 gpu_present() ? "cuda" : "host") == 0);
    iron_runtime_release(rt);
  }
  if (keep) setenv("IRON_DEVICE", keep, 1);
  free(keep);
}

static const iron_test_case_t kTests[] = {
    {"bogus_paths", test_bogus_paths},
    {"missing_symbol", test_missing_symbol},
    {"search_order_message", test_search_order_message},
    {"stub_driver", test_stub_driver},
    {"status", test_status},
    {"device_count", test_device_count},
    {"runtime_selection", test_runtime_selection},
};
IRON_TEST_MAIN(kTests)
