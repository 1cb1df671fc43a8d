// stablehlo.convolution through cuDNN (cuda_cudnn.h).
#include "device/cuda/cuda_cudnn.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_compile.h"
#include "device/cuda/cuda_ops_internal.h"

// Workspace a convolution may use: at most this, and at most 1/16 of the
// device's memory.
#define CUDNN_WS_LIMIT ((size_t)1 << 30)
// Candidates asked of the heuristics / Find (more than the algorithm kinds
// of any call: cuDNN 9 lists each kind once per math type).
#define CUDNN_CANDIDATES 16

struct iron_cudnn_device {
  const iron_cudnn_api_t *api;
  // cuDNN handles are not for concurrent use: prepare (heuristics, trial
  // runs on `trial`) and run (on the device's stream) take turns.
  pthread_mutex_t mu;
  cudnnHandle_t handle;
  CUstream trial;
  bool ok;
  char why[512];
};

struct iron_cudnn_conv {
  const iron_cudnn_api_t *api;
  iron_cudnn_device_t *ds;  // the device's (lives as long as the device)
  iron_cudnn_plan_t plan;
  iron_cudnn_descs_t descs;
  iron_cudnn_choice_t choice;
  size_t elem;
  size_t out_bytes;
  size_t stage_bytes[IRON_CUDNN_MAX_STAGE];
  iron_cuda_function_t *pre_fn[IRON_CUDNN_MAX_PRE], *post_fn[1];
  unsigned pre_grid[IRON_CUDNN_MAX_PRE], post_grid[1];
  float alpha_f, beta_f;
  double alpha_d, beta_d;
};

// --- switches and diagnostics ---------------------------------------------

// 0: off, 1: heuristics, 2: Find.
static int cudnn_mode(void) {
  const char *e = getenv("IRON_CUDA_CUDNN");
  if (e && e[0] == '0') return 0;
  if (e && strcmp(e, "find") == 0) return 2;
  return 1;
}

static bool debug_on(void) {
  const char *e = getenv("IRON_CUDA_CUDNN_DEBUG");
  return e && e[0] && e[0] != '0';
}

static void debug_op(const iron_ir_op_t *op, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void debug_op(const iron_ir_op_t *op, const char *fmt, ...) {
  if (!debug_on()) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (op && op->loc.file)
    fprintf(stderr, "iron cudnn: %s (%s:%d): %s\n", op->name, op->loc.file,
            (int)op->loc.line, msg);
  else
    fprintf(stderr, "iron cudnn: %s: %s\n", op ? op->name : "?", msg);
}

static bool tf32_enabled(void) {
  const char *e = getenv("IRON_CUDA_TF32");
  return !(e && e[0] == '0');
}

// Every precision_config entry DEFAULT (as cuda_conv.c and cuda_dot.c).
static bool precision_default(const iron_ir_op_t *op) {
  const iron_ir_attr_t *a = iron_ir_op_attr(op, "precision_config");
  if (!a || a->kind != IRON_ATTR_ARRAY) return true;
  for (uint32_t i = 0; i < a->array.count; ++i) {
    const iron_ir_attr_t *e = a->array.items[i];
    if (e && e->kind == IRON_ATTR_ENUM && e->enumv.value != 0) return false;
  }
  return true;
}

// A cuDNN failure as a short reason (cuDNN's name and its last message).
static void cudnn_why(const iron_cudnn_api_t *api, cudnnStatus_t s,
                      const char *what, char *why, size_t cap) {
  const char *name = api->cudnnGetErrorString ? api->cudnnGetErrorString(s)
                                              : NULL;
  char last[256] = "";
  if (api->cudnnGetLastErrorString)
    api->cudnnGetLastErrorString(last, sizeof(last));
  snprintf(why, cap, "%s: %s%s%s", what, name ? name : "cuDNN error",
           last[0] ? ": " : "", last);
}

// --- device state ------------------------------------------------------------

static pthread_mutex_t g_create_mu = PTHREAD_MUTEX_INITIALIZER;

bool iron_cudnn_device_get(iron_cuda_device_t *dev,
                           const iron_cudnn_api_t *api,
                           iron_cudnn_device_t **out, char *why,
                           size_t why_cap) {
  pthread_mutex_lock(&g_create_mu);
  iron_cudnn_device_t *s = dev->cudnn;
  if (!s) {
    s = calloc(1, sizeof(*s));
    if (!s) {
      pthread_mutex_unlock(&g_create_mu);
      snprintf(why, why_cap, "out of memory");
      return false;
    }
    s->api = api;
    pthread_mutex_init(&s->mu, NULL);
    iron_status_t st = iron_cuda_device_enter(dev);
    if (st) {
      snprintf(s->why, sizeof(s->why), "%s", iron_status_message(st));
      iron_status_free(st);
    } else {
      cudnnStatus_t r = api->cudnnCreate(&s->handle);
      if (r != IRON_CUDNN_STATUS_SUCCESS) {
        s->handle = NULL;
        cudnn_why(api, r, "cudnnCreate", s->why, sizeof(s->why));
      } else {
        CUresult cr = dev->api->cuStreamCreate(&s->trial,
                                               IRON_CU_STREAM_NON_BLOCKING);
        if (cr != IRON_CU_SUCCESS) {
          s->trial = NULL;
          snprintf(s->why, sizeof(s->why), "cuStreamCreate: CUresult %d",
                   (int)cr);
        } else {
          s->ok = true;
        }
      }
    }
    dev->cudnn = s;
  }
  pthread_mutex_unlock(&g_create_mu);
  if (!s->ok) {
    snprintf(why, why_cap, "cuDNN is not usable on CUDA device %d: %s",
             dev->ordinal, s->why);
    return false;
  }
  *out = s;
  return true;
}

void iron_cuda_cudnn_release(iron_cuda_device_t *dev) {
  iron_cudnn_device_t *s = dev->cudnn;
  if (!s) return;
  if (s->handle || s->trial) iron_status_free(iron_cuda_device_enter(dev));
  if (s->trial) {
    dev->api->cuStreamSynchronize(s->trial);
    dev->api->cuStreamDestroy(s->trial);
  }
  if (s->handle) s->api->cudnnDestroy(s->handle);
  pthread_mutex_destroy(&s->mu);
  free(s);
  dev->cudnn = NULL;
}

// --- descriptors ---------------------------------------------------------------

static int initial_math(const iron_cudnn_plan_t *p) {
  if (p->dtype == IRON_DTYPE_F32)
    return p->tf32 ? IRON_CUDNN_TENSOR_OP_MATH : IRON_CUDNN_FMA_MATH;
  if (p->dtype == IRON_DTYPE_F64) return IRON_CUDNN_DEFAULT_MATH;
  return IRON_CUDNN_TENSOR_OP_MATH;  // f16/bf16 with f32 accumulation
}

void iron_cudnn_descs_destroy(const iron_cudnn_api_t *api,
                              iron_cudnn_descs_t *d) {
  if (d->x) api->cudnnDestroyTensorDescriptor(d->x);
  if (d->y) api->cudnnDestroyTensorDescriptor(d->y);
  if (d->w) api->cudnnDestroyFilterDescriptor(d->w);
  if (d->conv) api->cudnnDestroyConvolutionDescriptor(d->conv);
  memset(d, 0, sizeof(*d));
}

static void to_int(int32_t n, const int64_t *v, int *out) {
  for (int32_t k = 0; k < n; ++k) out[k] = (int)v[k];
}

iron_status_t iron_cudnn_descs_create(const iron_cudnn_api_t *api,
                                      const iron_cudnn_plan_t *p,
                                      iron_cudnn_descs_t *out) {
  memset(out, 0, sizeof(*out));
  const int nd = 2 + p->nsp;
  int dims[IRON_CUDNN_MAX_ND], strides[IRON_CUDNN_MAX_ND];
  int pad[IRON_CUDNN_MAX_SP], stride[IRON_CUDNN_MAX_SP],
      dil[IRON_CUDNN_MAX_SP];
  iron_status_t st = iron_cudnn_status(
      api, api->cudnnCreateTensorDescriptor(&out->x),
      "cudnnCreateTensorDescriptor");
  if (!st) {
    to_int(nd, p->x.dims, dims);
    to_int(nd, p->x.strides, strides);
    st = iron_cudnn_status(api,
                           api->cudnnSetTensorNdDescriptor(
                               out->x, p->data_type, nd, dims, strides),
                           "cudnnSetTensorNdDescriptor (x)");
  }
  if (!st)
    st = iron_cudnn_status(api, api->cudnnCreateTensorDescriptor(&out->y),
                           "cudnnCreateTensorDescriptor");
  if (!st) {
    to_int(nd, p->y.dims, dims);
    to_int(nd, p->y.strides, strides);
    st = iron_cudnn_status(api,
                           api->cudnnSetTensorNdDescriptor(
                               out->y, p->data_type, nd, dims, strides),
                           "cudnnSetTensorNdDescriptor (y)");
  }
  if (!st)
    st = iron_cudnn_status(api, api->cudnnCreateFilterDescriptor(&out->w),
                           "cudnnCreateFilterDescriptor");
  if (!st) {
    to_int(nd, p->w.dims, dims);
    st = iron_cudnn_status(
        api,
        api->cudnnSetFilterNdDescriptor(out->w, p->data_type, p->filter_format,
                                        nd, dims),
        "cudnnSetFilterNdDescriptor");
  }
  if (!st)
    st = iron_cudnn_status(api,
                           api->cudnnCreateConvolutionDescriptor(&out->conv),
                           "cudnnCreateConvolutionDescriptor");
  if (!st) {
    to_int(p->nsp, p->pad, pad);
    to_int(p->nsp, p->stride, stride);
    to_int(p->nsp, p->dilation, dil);
    st = iron_cudnn_status(
        api,
        api->cudnnSetConvolutionNdDescriptor(out->conv, p->nsp, pad, stride,
                                             dil, p->mode, p->compute_type),
        "cudnnSetConvolutionNdDescriptor");
  }
  if (!st)
    st = iron_cudnn_status(
        api, api->cudnnSetConvolutionGroupCount(out->conv, (int)p->groups),
        "cudnnSetConvolutionGroupCount");
  if (!st)
    st = iron_cudnn_status(
        api, api->cudnnSetConvolutionMathType(out->conv, initial_math(p)),
        "cudnnSetConvolutionMathType");
  if (st) iron_cudnn_descs_destroy(api, out);
  return st;
}

// --- algorithms -------------------------------------------------------------------

// Algorithms whose result is a sum of exact products (in some order):
// integer-valued data stay exact as on the host; FFT and Winograd
// transform the operands and round differently.
static bool algo_exact(iron_cudnn_call_t call, int algo) {
  switch (call) {
    case IRON_CUDNN_CALL_FORWARD:
      return algo >= IRON_CUDNN_FWD_ALGO_IMPLICIT_GEMM &&
             algo <= IRON_CUDNN_FWD_ALGO_DIRECT;
    case IRON_CUDNN_CALL_BACKWARD_DATA:
      return algo == IRON_CUDNN_BWD_DATA_ALGO_0 ||
             algo == IRON_CUDNN_BWD_DATA_ALGO_1;
    case IRON_CUDNN_CALL_BACKWARD_FILTER:
      return algo == IRON_CUDNN_BWD_FILTER_ALGO_0 ||
             algo == IRON_CUDNN_BWD_FILTER_ALGO_1 ||
             algo == IRON_CUDNN_BWD_FILTER_ALGO_3;
  }
  return false;
}

// The math type a candidate runs with, or -1 when it may not run: exact
// f32 runs FMA only (TENSOR_OP is TF32 for f32 data; DEFAULT permits it,
// so it is narrowed to FMA).
static int candidate_math(const iron_cudnn_plan_t *plan,
                          const iron_cudnn_algo_perf_t *pf) {
  if (plan->dtype == IRON_DTYPE_F32 && !plan->tf32) {
    if (pf->mathType == IRON_CUDNN_FMA_MATH ||
        pf->mathType == IRON_CUDNN_DEFAULT_MATH)
      return IRON_CUDNN_FMA_MATH;
    return -1;
  }
  return pf->mathType;
}

// All acceptable candidates in order (at most `cap`); the count.
static int pick_all(const iron_cudnn_plan_t *plan,
                    const iron_cudnn_algo_perf_t *perf, int n,
                    size_t ws_limit, iron_cudnn_choice_t *out, int cap,
                    char *why, size_t why_cap) {
  int got = 0, ok_status = 0, exact = 0, det = 0, fits = 0;
  for (int i = 0; i < n && got < cap; ++i) {
    const iron_cudnn_algo_perf_t *pf = &perf[i];
    if (pf->status != IRON_CUDNN_STATUS_SUCCESS) continue;
    ok_status++;
    if (!algo_exact(plan->call, pf->algo)) continue;
    exact++;
    if (pf->determinism != IRON_CUDNN_DETERMINISTIC) continue;
    det++;
    if (pf->memory > ws_limit) continue;
    fits++;
    int math = candidate_math(plan, pf);
    if (math < 0) continue;
    out[got].algo = pf->algo;
    out[got].math_type = math;
    out[got].workspace = pf->memory;
    out[got].time_ms = pf->time;
    got++;
  }
  if (!got && why && why_cap)
    snprintf(why, why_cap,
             "no algorithm: %d candidates, %d supported, %d of the exact "
             "kinds (GEMM/direct), %d deterministic, %d within the %zu-byte "
             "workspace, none %s",
             n, ok_status, exact, det, fits, ws_limit,
             plan->dtype == IRON_DTYPE_F32 && !plan->tf32 ? "without TF32"
                                                          : "left");
  return got;
}

bool iron_cudnn_pick(const iron_cudnn_plan_t *plan,
                     const iron_cudnn_algo_perf_t *perf, int n,
                     size_t ws_limit, iron_cudnn_choice_t *out, char *why,
                     size_t why_cap) {
  return pick_all(plan, perf, n, ws_limit, out, 1, why, why_cap) == 1;
}

static cudnnStatus_t get_candidates(const iron_cudnn_api_t *api,
                                    cudnnHandle_t h,
                                    const iron_cudnn_plan_t *p,
                                    const iron_cudnn_descs_t *d,
                                    iron_cudnn_algo_perf_t *perf, int *n) {
  switch (p->call) {
    case IRON_CUDNN_CALL_FORWARD:
      return api->cudnnGetConvolutionForwardAlgorithm_v7(
          h, d->x, d->w, d->conv, d->y, CUDNN_CANDIDATES, n, perf);
    case IRON_CUDNN_CALL_BACKWARD_DATA:
      return api->cudnnGetConvolutionBackwardDataAlgorithm_v7(
          h, d->w, d->y, d->conv, d->x, CUDNN_CANDIDATES, n, perf);
    case IRON_CUDNN_CALL_BACKWARD_FILTER:
      return api->cudnnGetConvolutionBackwardFilterAlgorithm_v7(
          h, d->x, d->y, d->conv, d->w, CUDNN_CANDIDATES, n, perf);
  }
  return IRON_CUDNN_STATUS_BAD_PARAM;
}

static cudnnStatus_t workspace_of(const iron_cudnn_api_t *api,
                                  cudnnHandle_t h, const iron_cudnn_plan_t *p,
                                  const iron_cudnn_descs_t *d, int algo,
                                  size_t *size) {
  switch (p->call) {
    case IRON_CUDNN_CALL_FORWARD:
      return api->cudnnGetConvolutionForwardWorkspaceSize(
          h, d->x, d->w, d->conv, d->y, algo, size);
    case IRON_CUDNN_CALL_BACKWARD_DATA:
      return api->cudnnGetConvolutionBackwardDataWorkspaceSize(
          h, d->w, d->y, d->conv, d->x, algo, size);
    case IRON_CUDNN_CALL_BACKWARD_FILTER:
      return api->cudnnGetConvolutionBackwardFilterWorkspaceSize(
          h, d->x, d->y, d->conv, d->w, algo, size);
  }
  return IRON_CUDNN_STATUS_BAD_PARAM;
}

// The first candidate cuDNN confirms (math type set, workspace queried).
static bool confirm(const iron_cudnn_api_t *api, cudnnHandle_t h,
                    const iron_cudnn_plan_t *plan, const iron_cudnn_descs_t *d,
                    size_t ws_limit, const iron_cudnn_choice_t *cand, int n,
                    iron_cudnn_choice_t *out, char *why, size_t why_cap) {
  for (int i = 0; i < n; ++i) {
    cudnnStatus_t r =
        api->cudnnSetConvolutionMathType(d->conv, cand[i].math_type);
    size_t ws = 0;
    if (r == IRON_CUDNN_STATUS_SUCCESS)
      r = workspace_of(api, h, plan, d, cand[i].algo, &ws);
    if (r != IRON_CUDNN_STATUS_SUCCESS) {
      cudnn_why(api, r, "workspace query", why, why_cap);
      continue;
    }
    if (ws > ws_limit) {
      snprintf(why, why_cap, "algorithm %d needs %zu bytes of workspace",
               cand[i].algo, ws);
      continue;
    }
    *out = cand[i];
    out->workspace = ws;
    return true;
  }
  return false;
}

bool iron_cudnn_choose(const iron_cudnn_api_t *api, cudnnHandle_t handle,
                       const iron_cudnn_plan_t *plan,
                       const iron_cudnn_descs_t *d, size_t ws_limit,
                       iron_cudnn_choice_t *out, char *why, size_t why_cap) {
  iron_cudnn_algo_perf_t perf[CUDNN_CANDIDATES];
  memset(perf, 0, sizeof(perf));
  int n = 0;
  cudnnStatus_t r = get_candidates(api, handle, plan, d, perf, &n);
  if (r != IRON_CUDNN_STATUS_SUCCESS) {
    cudnn_why(api, r, "heuristics", why, why_cap);
    return false;
  }
  if (n > CUDNN_CANDIDATES) n = CUDNN_CANDIDATES;
  iron_cudnn_choice_t cand[CUDNN_CANDIDATES];
  int nc = pick_all(plan, perf, n, ws_limit, cand, CUDNN_CANDIDATES, why,
                    why_cap);
  return nc > 0 &&
         confirm(api, handle, plan, d, ws_limit, cand, nc, out, why, why_cap);
}

// --- the call ----------------------------------------------------------------------

static cudnnStatus_t call_cudnn(const iron_cudnn_conv_t *c, cudnnHandle_t h,
                                void *x, void *w, void *y, void *ws) {
  const iron_cudnn_api_t *api = c->api;
  const bool dbl = c->plan.dtype == IRON_DTYPE_F64;
  const void *alpha = dbl ? (const void *)&c->alpha_d : (const void *)&c->alpha_f;
  const void *beta = dbl ? (const void *)&c->beta_d : (const void *)&c->beta_f;
  const iron_cudnn_descs_t *d = &c->descs;
  const int algo = c->choice.algo;
  const size_t wsn = c->choice.workspace;
  switch (c->plan.call) {
    case IRON_CUDNN_CALL_FORWARD:
      return api->cudnnConvolutionForward(h, alpha, d->x, x, d->w, w, d->conv,
                                          algo, ws, wsn, beta, d->y, y);
    case IRON_CUDNN_CALL_BACKWARD_DATA:
      return api->cudnnConvolutionBackwardData(h, alpha, d->w, w, d->y, y,
                                               d->conv, algo, ws, wsn, beta,
                                               d->x, x);
    case IRON_CUDNN_CALL_BACKWARD_FILTER:
      return api->cudnnConvolutionBackwardFilter(h, alpha, d->x, x, d->y, y,
                                                 d->conv, algo, ws, wsn, beta,
                                                 d->w, w);
  }
  return IRON_CUDNN_STATUS_BAD_PARAM;
}

static size_t tensor_bytes(const iron_cudnn_plan_t *p,
                           const iron_cudnn_tensor_t *t, size_t elem) {
  int64_t span = 1;
  for (int32_t k = 0; k < 2 + p->nsp; ++k)
    span += (t->dims[k] - 1) * t->strides[k];
  return (size_t)span * elem;
}

// Runs the chosen algorithm once on zeroed scratch buffers on the trial
// stream (or, with `find`, measures every algorithm there and picks
// again): cuDNN's own refusals at execution and its lazily loaded kernels
// then happen here, at compile time, not inside a run or a graph capture.
// Skipped (true) when the scratch would take more than a quarter of the
// free memory. false with the reason in `why` when it fails.
static bool trial_run(iron_cuda_device_t *dev, iron_cudnn_conv_t *c,
                      bool find, size_t ws_limit, char *why, size_t why_cap) {
  const iron_cuda_api_t *cu = dev->api;
  const iron_cudnn_api_t *api = c->api;
  iron_cudnn_device_t *s = c->ds;
  size_t bytes[4] = {tensor_bytes(&c->plan, &c->plan.x, c->elem),
                     tensor_bytes(&c->plan, &c->plan.w, c->elem),
                     tensor_bytes(&c->plan, &c->plan.y, c->elem),
                     find ? ws_limit : c->choice.workspace};
  size_t total = bytes[0] + bytes[1] + bytes[2] + bytes[3];
  size_t free_b = 0, total_b = 0;
  if (cu->cuMemGetInfo(&free_b, &total_b) != IRON_CU_SUCCESS ||
      total > free_b / 4) {
    if (find) {
      // Measure with the heuristic choice's workspace only.
      bytes[3] = c->choice.workspace;
      total = bytes[0] + bytes[1] + bytes[2] + bytes[3];
    }
    if (total > free_b / 4) return true;
  }
  CUdeviceptr buf[4] = {0, 0, 0, 0};
  bool ok = true;
  for (int i = 0; i < 4 && ok; ++i) {
    if (!bytes[i]) continue;
    CUresult r = cu->cuMemAlloc(&buf[i], bytes[i]);
    if (r == IRON_CU_SUCCESS) r = cu->cuMemsetD8Async(buf[i], 0, bytes[i], s->trial);
    if (r != IRON_CU_SUCCESS) {
      snprintf(why, why_cap, "trial buffers: CUresult %d", (int)r);
      ok = false;
    }
  }
  void *x = (void *)(uintptr_t)buf[0], *w = (void *)(uintptr_t)buf[1],
       *y = (void *)(uintptr_t)buf[2], *ws = (void *)(uintptr_t)buf[3];
  pthread_mutex_lock(&s->mu);
  cudnnStatus_t r = ok ? api->cudnnSetStream(s->handle, s->trial)
                       : IRON_CUDNN_STATUS_SUCCESS;
  if (ok && r != IRON_CUDNN_STATUS_SUCCESS) {
    cudnn_why(api, r, "cudnnSetStream", why, why_cap);
    ok = false;
  }
  if (ok && find) {
    iron_cudnn_algo_perf_t perf[CUDNN_CANDIDATES];
    memset(perf, 0, sizeof(perf));
    int n = 0;
    const iron_cudnn_descs_t *d = &c->descs;
    switch (c->plan.call) {
      case IRON_CUDNN_CALL_FORWARD:
        r = api->cudnnFindConvolutionForwardAlgorithmEx(
            s->handle, d->x, x, d->w, w, d->conv, d->y, y, CUDNN_CANDIDATES,
            &n, perf, ws, bytes[3]);
        break;
      case IRON_CUDNN_CALL_BACKWARD_DATA:
        r = api->cudnnFindConvolutionBackwardDataAlgorithmEx(
            s->handle, d->w, w, d->y, y, d->conv, d->x, x, CUDNN_CANDIDATES,
            &n, perf, ws, bytes[3]);
        break;
      case IRON_CUDNN_CALL_BACKWARD_FILTER:
        r = api->cudnnFindConvolutionBackwardFilterAlgorithmEx(
            s->handle, d->x, x, d->y, y, d->conv, d->w, w, CUDNN_CANDIDATES,
            &n, perf, ws, bytes[3]);
        break;
    }
    if (r != IRON_CUDNN_STATUS_SUCCESS) {
      cudnn_why(api, r, "cudnnFind*AlgorithmEx", why, why_cap);
      ok = false;
    } else {
      if (n > CUDNN_CANDIDATES) n = CUDNN_CANDIDATES;
      iron_cudnn_choice_t cand[CUDNN_CANDIDATES], chosen;
      int nc = pick_all(&c->plan, perf, n, bytes[3], cand, CUDNN_CANDIDATES,
                        why, why_cap);
      // Find's choice replaces the heuristic one when cuDNN confirms it.
      if (nc > 0 && confirm(api, s->handle, &c->plan, d, bytes[3], cand, nc,
                            &chosen, why, why_cap))
        c->choice = chosen;
      else
        api->cudnnSetConvolutionMathType(d->conv, c->choice.math_type);
    }
  }
  if (ok) {
    r = call_cudnn(c, s->handle, x, w, y, ws);
    if (r != IRON_CUDNN_STATUS_SUCCESS) {
      cudnn_why(api, r, "trial run", why, why_cap);
      ok = false;
    }
  }
  if (ok) {
    CUresult cr = cu->cuStreamSynchronize(s->trial);
    if (cr != IRON_CU_SUCCESS) {
      snprintf(why, why_cap, "trial run: CUresult %d", (int)cr);
      ok = false;
    }
  }
  pthread_mutex_unlock(&s->mu);
  cu->cuStreamSynchronize(s->trial);
  for (int i = 0; i < 4; ++i)
    if (buf[i]) cu->cuMemFree(buf[i]);
  return ok;
}

void iron_cuda_cudnn_conv_destroy(iron_cudnn_conv_t *c) {
  if (!c) return;
  if (c->api) iron_cudnn_descs_destroy(c->api, &c->descs);
  free(c);
}

// Requests the plan's staging copy kernels.
static iron_status_t request_copies(iron_cuda_device_t *dev,
                                    iron_cudnn_conv_t *c) {
  for (int32_t i = 0; i < c->plan.num_pre + c->plan.num_post; ++i) {
    bool pre = i < c->plan.num_pre;
    const iron_cudnn_copy_t *cp =
        pre ? &c->plan.pre[i] : &c->plan.post[i - c->plan.num_pre];
    char *src = NULL;
    unsigned grid = 0;
    IRON_RETURN_IF_ERROR_PLAIN(
        iron_cudnn_gen_copy("iron_cudnn_copy", c->elem, cp, &src, &grid));
    iron_cuda_function_t *fn = NULL;
    iron_status_t st =
        iron_cuda_ops_request(dev, src, "iron_cudnn_copy", &fn);
    free(src);
    IRON_RETURN_IF_ERROR_PLAIN(st);
    if (pre) {
      c->pre_fn[i] = fn;
      c->pre_grid[i] = grid;
    } else {
      c->post_fn[i - c->plan.num_pre] = fn;
      c->post_grid[i - c->plan.num_pre] = grid;
    }
  }
  return IRON_OK;
}

static const char *buf_name(int32_t buf) {
  switch (buf) {
    case IRON_CUDNN_BUF_LHS: return "lhs";
    case IRON_CUDNN_BUF_RHS: return "rhs";
    case IRON_CUDNN_BUF_OUT: return "result";
    default: return "staged";
  }
}

// Plans, builds and tries one call; true when it is taken (*out set).
static bool try_call(iron_cuda_device_t *dev, iron_cudnn_device_t *s,
                     const iron_conv_plan_t *cp, iron_cudnn_call_t call,
                     bool tf32, bool packed, int mode, bool *out_cropped,
                     iron_cudnn_conv_t **out, char *why, size_t why_cap) {
  const iron_cudnn_api_t *api = s->api;
  iron_cudnn_conv_t *c = calloc(1, sizeof(*c));
  if (!c) {
    snprintf(why, why_cap, "out of memory");
    return false;
  }
  c->api = api;
  c->ds = s;
  *out_cropped = false;
  if (!iron_cudnn_plan_make_packed(cp, call, tf32, packed, &c->plan, why,
                                   why_cap)) {
    free(c);
    return false;
  }
  *out_cropped = c->plan.cropped;
  iron_status_t st = iron_cudnn_descs_create(api, &c->plan, &c->descs);
  if (st) {
    snprintf(why, why_cap, "%s", iron_status_message(st));
    iron_status_free(st);
    iron_cuda_cudnn_conv_destroy(c);
    return false;
  }
  c->elem = iron_dtype_size(c->plan.dtype);
  size_t ws_limit = dev->total_mem / 16;
  if (ws_limit > CUDNN_WS_LIMIT || ws_limit == 0) ws_limit = CUDNN_WS_LIMIT;
  pthread_mutex_lock(&s->mu);
  st = iron_cuda_device_enter(dev);
  bool ok = !st && iron_cudnn_choose(api, s->handle, &c->plan, &c->descs,
                                     ws_limit, &c->choice, why, why_cap);
  pthread_mutex_unlock(&s->mu);
  if (st) {
    snprintf(why, why_cap, "%s", iron_status_message(st));
    iron_status_free(st);
  }
  if (ok) ok = trial_run(dev, c, mode == 2, ws_limit, why, why_cap);
  if (!ok) {
    iron_cuda_cudnn_conv_destroy(c);
    return false;
  }
  c->alpha_f = 1.0f;
  c->beta_f = 0.0f;
  c->alpha_d = 1.0;
  c->beta_d = 0.0;
  c->out_bytes = (size_t)iron_ir_type_num_elements(cp->out) * c->elem;
  for (int32_t k = 0; k < c->plan.num_stage; ++k)
    c->stage_bytes[k] = (size_t)c->plan.stage_elems[k] * c->elem;
  *out = c;
  return true;
}

iron_status_t iron_cuda_cudnn_conv_prepare(iron_cuda_device_t *dev,
                                           const iron_ir_op_t *op,
                                           iron_cudnn_conv_t **out_conv) {
  *out_conv = NULL;
  const int mode = cudnn_mode();
  if (mode == 0) return IRON_OK;
  iron_conv_plan_t cp;
  iron_status_t st = iron_conv_plan_read(op, &cp);
  if (st) {  // the caller's validation reports it
    iron_status_free(st);
    return IRON_OK;
  }
  iron_cudnn_call_t calls[2];
  const int ncalls = iron_cudnn_plan_calls(&cp, calls);
  if (ncalls == 0) {
    debug_op(op,
             "kept on the CUDA kernels: no cuDNN call has lhs_dilation with "
             "window strides or batch groups");
    return IRON_OK;
  }
  // Cheap refusals first: no library load for a convolution cuDNN cannot
  // take anyway.
  iron_cudnn_plan_t probe;
  char why[768] = "";
  bool any = false;
  for (int i = 0; i < ncalls && !any; ++i)
    any = iron_cudnn_plan_make(&cp, calls[i], false, &probe, why, sizeof(why));
  if (!any) {
    debug_op(op, "kept on the CUDA kernels: %s", why);
    return IRON_OK;
  }
  const iron_cudnn_api_t *api = iron_cudnn_api_get();
  if (!api->has_cudnn) {
    debug_op(op, "kept on the CUDA kernels: %s", api->error);
    return IRON_OK;
  }
  iron_cudnn_device_t *s = NULL;
  if (!iron_cudnn_device_get(dev, api, &s, why, sizeof(why))) {
    debug_op(op, "kept on the CUDA kernels: %s", why);
    return IRON_OK;
  }
  const bool tf32 = precision_default(op) && tf32_enabled();
  iron_cudnn_conv_t *c = NULL;
  char reasons[1600] = "";
  for (int i = 0; i < ncalls && !c; ++i) {
    // A sub-view's strides first; when cuDNN refuses them, a copy.
    bool cropped = false;
    for (int packed = 0; packed < 2 && !c; ++packed) {
      if (packed && !cropped) break;
      why[0] = '\0';
      if (!try_call(dev, s, &cp, calls[i], tf32, packed, mode, &cropped, &c,
                    why, sizeof(why))) {
        size_t len = strlen(reasons);
        snprintf(reasons + len, sizeof(reasons) - len, "%s%s%s: %s",
                 len ? "; " : "", iron_cudnn_call_name(calls[i]),
                 packed ? " (packed)" : "", why);
      }
    }
  }
  if (!c) {
    debug_op(op, "kept on the CUDA kernels: %s", reasons);
    return IRON_OK;
  }
  st = request_copies(dev, c);
  if (st) {
    iron_cuda_cudnn_conv_destroy(c);
    return st;
  }
  debug_op(op,
           "cuDNN %s, algorithm %d (math type %d, %zu bytes of workspace%s), "
           "x from %s, w from %s, y from %s%s%s",
           iron_cudnn_call_name(c->plan.call), c->choice.algo,
           c->choice.math_type, c->choice.workspace,
           mode == 2 ? ", measured" : "", buf_name(c->plan.x.buf),
           buf_name(c->plan.w.buf), buf_name(c->plan.y.buf),
           c->plan.num_post ? ", output staged" : "",
           c->plan.out_zero ? ", result zero-filled" : "");
  *out_conv = c;
  return IRON_OK;
}

// --- run -------------------------------------------------------------------------

iron_status_t iron_cuda_cudnn_conv_run(iron_cuda_device_t *dev,
                                       const iron_cudnn_conv_t *c,
                                       const void *lhs, const void *rhs,
                                       void *out) {
  const iron_cudnn_plan_t *p = &c->plan;
  const iron_cuda_api_t *cu = dev->api;
  iron_storage_t *tmp[IRON_CUDNN_MAX_STAGE + 1] = {NULL};
  char *base[IRON_CUDNN_BUF_STAGE + IRON_CUDNN_MAX_STAGE] = {
      (char *)(uintptr_t)lhs, (char *)(uintptr_t)rhs, (char *)out};
  iron_status_t st = IRON_OK;
  for (int32_t k = 0; k < p->num_stage && !st; ++k) {
    st = iron_storage_allocate(&dev->base, c->stage_bytes[k], &tmp[k]);
    if (!st) base[IRON_CUDNN_BUF_STAGE + k] = tmp[k]->data;
  }
  void *ws = NULL;
  if (!st && c->choice.workspace) {
    st = iron_storage_allocate(&dev->base, c->choice.workspace,
                               &tmp[IRON_CUDNN_MAX_STAGE]);
    if (!st) ws = tmp[IRON_CUDNN_MAX_STAGE]->data;
  }
  if (!st) st = iron_cuda_device_enter(dev);
  if (!st && p->out_zero)
    st = iron_cuda_status(
        cu,
        cu->cuMemsetD8Async((CUdeviceptr)(uintptr_t)out, 0, c->out_bytes,
                            dev->stream),
        "cuMemsetD8Async (convolution result)");
  for (int32_t k = 0; k < p->num_stage && !st; ++k)
    if (p->stage_zero[k])
      st = iron_cuda_status(
          cu,
          cu->cuMemsetD8Async(
              (CUdeviceptr)(uintptr_t)base[IRON_CUDNN_BUF_STAGE + k], 0,
              c->stage_bytes[k], dev->stream),
          "cuMemsetD8Async (convolution staging)");
  for (int32_t i = 0; i < p->num_pre && !st; ++i) {
    const void *src = base[p->pre[i].src_buf];
    void *dst = base[p->pre[i].dst_buf];
    void *args[2] = {&src, &dst};
    st = iron_cuda_launch(dev, c->pre_fn[i], c->pre_grid[i], 1, 1, 256, 0,
                          args);
  }
  if (!st) {
    void *x = base[p->x.buf] + p->x.offset * (int64_t)c->elem;
    void *w = base[p->w.buf] + p->w.offset * (int64_t)c->elem;
    void *y = base[p->y.buf] + p->y.offset * (int64_t)c->elem;
    iron_cudnn_device_t *s = c->ds;
    pthread_mutex_lock(&s->mu);
    cudnnStatus_t r = c->api->cudnnSetStream(s->handle, dev->stream);
    if (r == IRON_CUDNN_STATUS_SUCCESS) r = call_cudnn(c, s->handle, x, w, y, ws);
    pthread_mutex_unlock(&s->mu);
    st = iron_cudnn_status(c->api, r,
                           p->call == IRON_CUDNN_CALL_FORWARD
                               ? "cudnnConvolutionForward"
                           : p->call == IRON_CUDNN_CALL_BACKWARD_DATA
                               ? "cudnnConvolutionBackwardData"
                               : "cudnnConvolutionBackwardFilter");
  }
  for (int32_t i = 0; i < p->num_post && !st; ++i) {
    const void *src = base[p->post[i].src_buf];
    void *dst = base[p->post[i].dst_buf];
    void *args[2] = {&src, &dst};
    st = iron_cuda_launch(dev, c->post_fn[i], c->post_grid[i], 1, 1, 256, 0,
                          args);
  }
  // Stream-ordered frees: back to the pool after the work that uses them.
  for (int k = 0; k <= IRON_CUDNN_MAX_STAGE; ++k) iron_storage_release(tmp[k]);
  return st;
}
