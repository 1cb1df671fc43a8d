// Run-time loading of cuDNN 9 (cuda_cudnn_api.h). The search is
// cuda_api.c's (iron_cuda_api_open_library); this file resolves the
// symbols and checks the version.
#include "device/cuda/cuda_cudnn_api.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

// cuDNN 9 only: the legacy convolution entry points and enum values
// declared here are those of 9.x. libcudnn.so.9 is a small dispatcher that
// loads its sub-libraries (libcudnn_cnn.so.9, ...) from its own folder.
static const char *const kCudnnNames[] = {"libcudnn.so.9", NULL};

void iron_cudnn_api_check(iron_cudnn_api_t *api) {
  api->has_cudnn = false;
#define CHECK_ONE(field, sym, ret, params)                                  \
  if (!api->field) {                                                        \
    snprintf(api->error, sizeof(api->error),                                \
             "cuDNN (%s) lacks the symbol %s", api->path[0] ? api->path : "?", \
             sym);                                                          \
    return;                                                                 \
  }
  IRON_CUDNN_SYMBOLS(CHECK_ONE)
#undef CHECK_ONE
  api->version = api->cudnnGetVersion();
  if (api->version < 90000 || api->version >= 100000) {
    snprintf(api->error, sizeof(api->error),
             "cuDNN %zu.%zu.%zu (%s) is not cuDNN 9, which ironjax needs",
             api->version / 10000, api->version / 100 % 100,
             api->version % 100, api->path[0] ? api->path : "?");
    return;
  }
  api->error[0] = '\0';
  api->has_cudnn = true;
}

void iron_cudnn_api_load_from(const char *path, iron_cudnn_api_t *out_api) {
  memset(out_api, 0, sizeof(*out_api));
  void *h = iron_cuda_api_open_library(
      "libcudnn (cuDNN 9)", kCudnnNames, path, out_api->path,
      sizeof(out_api->path), out_api->error, sizeof(out_api->error));
  if (!h) return;
#define RESOLVE_ONE(field, sym, ret, params) \
  {                                          \
    void *p_ = dlsym(h, sym);                \
    memcpy(&out_api->field, &p_, sizeof(p_)); \
  }
  IRON_CUDNN_SYMBOLS(RESOLVE_ONE)
#undef RESOLVE_ONE
  iron_cudnn_api_check(out_api);
  // Handles stay open for the life of the process once in use; a library
  // that is not usable is closed again.
  if (!out_api->has_cudnn) {
    char error[sizeof(out_api->error)];
    memcpy(error, out_api->error, sizeof(error));
    dlclose(h);
    memset(out_api, 0, sizeof(*out_api));
    memcpy(out_api->error, error, sizeof(error));
  }
}

static iron_cudnn_api_t g_cudnn;
static pthread_once_t g_cudnn_once = PTHREAD_ONCE_INIT;
static void init_cudnn(void) { iron_cudnn_api_load_from(NULL, &g_cudnn); }

const iron_cudnn_api_t *iron_cudnn_api_get(void) {
  pthread_once(&g_cudnn_once, init_cudnn);
  return &g_cudnn;
}

iron_status_t iron_cudnn_status(const iron_cudnn_api_t *api, cudnnStatus_t s,
                                const char *what) {
  if (s == IRON_CUDNN_STATUS_SUCCESS) return IRON_OK;
  const char *name = api && api->cudnnGetErrorString
                         ? api->cudnnGetErrorString(s)
                         : NULL;
  // 4003/4004: host/device allocation failures (CUDNN_STATUS_INTERNAL_ERROR_
  // {HOST,DEVICE}_ALLOCATION_FAILED).
  iron_status_code_t code = (s == 4003 || s == 4004)
                                ? IRON_STATUS_RESOURCE_EXHAUSTED
                                : IRON_STATUS_INTERNAL;
  return iron_status_make(code, "%s failed: %s (cudnnStatus_t %d)", what,
                          name ? name : "unknown cuDNN status", (int)s);
}
