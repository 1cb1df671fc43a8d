// The CUDA libraries ironjax uses, loaded at run time (ARCHITECTURE decision
// 6): libcuda (driver API), libnvrtc, libcublasLt. Our own declarations of
// the few types and entry points we call, so the plugin builds without CUDA
// headers and loads without CUDA libraries; the values below are the ABI of
// CUDA 12/13 (driver API v2 entry points).
//
// Each X-macro row is X(field, "exported symbol", return type, (params)).
// iron_cuda_api_get loads every library once per process; when one is
// missing, the error names the library and where it looked, and when a
// symbol is missing, it names the symbol and the library.
#ifndef IRON_DEVICE_CUDA_CUDA_API_H_
#define IRON_DEVICE_CUDA_CUDA_API_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// --- driver API types ------------------------------------------------------
typedef int CUresult;  // 0 == CUDA_SUCCESS
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef unsigned long long CUdeviceptr;
typedef struct CUgraphNode_st *CUgraphNode;
typedef unsigned long long CUgraphConditionalHandle;

// cuda.h's CUgraphNodeParams (CUDA 12.3+; 256 bytes) with the one member we
// fill, CUDA_CONDITIONAL_NODE_PARAMS. The padding keeps the driver's size:
// unused bytes must be zero.
typedef struct iron_cu_conditional_params {
  CUgraphConditionalHandle handle;
  int type;           // CUgraphConditionalNodeType (IRON_CU_GRAPH_COND_TYPE_*)
  unsigned int size;  // number of body graphs (1 for WHILE)
  CUgraph *graphs_out;  // driver-owned array of the body graphs
  CUcontext ctx;
} iron_cu_conditional_params_t;
typedef struct CUgraphNodeParams {
  int type;  // CUgraphNodeType (IRON_CU_GRAPH_NODE_TYPE_*)
  int reserved0[3];
  union {
    long long reserved1[29];
    iron_cu_conditional_params_t conditional;
  } u;
  long long reserved2;
} CUgraphNodeParams;
#ifndef __cplusplus
_Static_assert(sizeof(CUgraphNodeParams) == 256,
               "CUgraphNodeParams must match cuda.h");
#endif

enum {
  IRON_CU_SUCCESS = 0,
  IRON_CU_ERROR_INVALID_VALUE = 1,
  IRON_CU_ERROR_OUT_OF_MEMORY = 2,
  IRON_CU_ERROR_NOT_INITIALIZED = 3,
  IRON_CU_ERROR_DEINITIALIZED = 4,
  IRON_CU_ERROR_ECC_UNCORRECTABLE = 214,
  IRON_CU_ERROR_NVLINK_UNCORRECTABLE = 220,
  IRON_CU_ERROR_CONTAINED = 226,
  IRON_CU_ERROR_NOT_READY = 600,
  IRON_CU_ERROR_ILLEGAL_ADDRESS = 700,
  IRON_CU_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
  IRON_CU_ERROR_LAUNCH_TIMEOUT = 702,
  IRON_CU_ERROR_CONTEXT_IS_DESTROYED = 709,
  IRON_CU_ERROR_ASSERT = 710,
  IRON_CU_ERROR_HARDWARE_STACK_ERROR = 714,
  IRON_CU_ERROR_ILLEGAL_INSTRUCTION = 715,
  IRON_CU_ERROR_MISALIGNED_ADDRESS = 716,
  IRON_CU_ERROR_INVALID_ADDRESS_SPACE = 717,
  IRON_CU_ERROR_INVALID_PC = 718,
  IRON_CU_ERROR_LAUNCH_FAILED = 719,
  IRON_CU_ERROR_TENSOR_MEMORY_LEAK = 721,
  IRON_CU_ERROR_NOT_PERMITTED = 800,
  IRON_CU_ERROR_MPS_CLIENT_TERMINATED = 810,
  IRON_CU_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  IRON_CU_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
  IRON_CU_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908,
  IRON_CU_ERROR_EXTERNAL_DEVICE = 911,
  IRON_CU_ERROR_UNKNOWN = 999,
  // CUdevice_attribute values
  IRON_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
  IRON_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
  IRON_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
  IRON_CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
  // CUmemPool_attribute
  IRON_CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
  // cuStreamCreate flags
  IRON_CU_STREAM_NON_BLOCKING = 1,
  // cuEventCreate flags
  IRON_CU_EVENT_DISABLE_TIMING = 2,
  // CUfunction_attribute
  IRON_CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
  // CUstreamCaptureMode
  IRON_CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
  IRON_CU_STREAM_CAPTURE_MODE_RELAXED = 2,
  // CUstreamCaptureStatus
  IRON_CU_STREAM_CAPTURE_STATUS_NONE = 0,
  IRON_CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
  IRON_CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2,
  // CUgraphNodeType, CUgraphConditionalNodeType
  IRON_CU_GRAPH_NODE_TYPE_CONDITIONAL = 13,
  IRON_CU_GRAPH_COND_TYPE_WHILE = 1,
  // cuGraphConditionalHandleCreate flags
  IRON_CU_GRAPH_COND_ASSIGN_DEFAULT = 1,
};

// --- NVRTC types -------------------------------------------------------------
typedef int nvrtcResult;  // 0 == NVRTC_SUCCESS
typedef struct _nvrtcProgram *nvrtcProgram;

// --- cuBLASLt types ----------------------------------------------------------
typedef int cublasStatus_t;  // 0 == CUBLAS_STATUS_SUCCESS
typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct cublasLtMatmulDescOpaque_st *cublasLtMatmulDesc_t;
typedef struct cublasLtMatrixLayoutOpaque_st *cublasLtMatrixLayout_t;
typedef struct cublasLtMatmulPreferenceOpaque_st *cublasLtMatmulPreference_t;
typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

// cuBLASLt / library_types.h enum values (cublasLt.h, cublas_api.h,
// library_types.h of CUDA 12/13).
enum {
  IRON_CUDA_R_32F = 0,
  IRON_CUDA_R_64F = 1,
  IRON_CUDA_R_16F = 2,
  IRON_CUDA_C_32F = 4,
  IRON_CUDA_C_64F = 5,
  IRON_CUDA_R_16BF = 14,
  IRON_CUBLAS_COMPUTE_32F = 68,
  IRON_CUBLAS_COMPUTE_64F = 70,
  IRON_CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  IRON_CUBLAS_OP_N = 0,
  IRON_CUBLAS_OP_T = 1,
  // cublasLtMatmulDescAttributes_t
  IRON_CUBLASLT_MATMUL_DESC_TRANSA = 3,
  IRON_CUBLASLT_MATMUL_DESC_TRANSB = 4,
  // cublasLtMatrixLayoutAttribute_t
  IRON_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  IRON_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
  // cublasLtMatmulPreferenceAttributes_t
  IRON_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
};

// --- cuFFT types (cufft.h of CUDA 12/13) ------------------------------------
typedef int cufftResult;  // 0 == CUFFT_SUCCESS
typedef int cufftHandle;
enum {
  IRON_CUFFT_FORWARD = -1,
  IRON_CUFFT_INVERSE = 1,
  // cufftType
  IRON_CUFFT_R2C = 0x2a,
  IRON_CUFFT_C2R = 0x2c,
  IRON_CUFFT_C2C = 0x29,
  IRON_CUFFT_D2Z = 0x6a,
  IRON_CUFFT_Z2D = 0x6c,
  IRON_CUFFT_Z2Z = 0x69,
};

#define IRON_CUDA_DRIVER_SYMBOLS(X)                                          \
  X(cuInit, "cuInit", CUresult, (unsigned int flags))                        \
  X(cuDriverGetVersion, "cuDriverGetVersion", CUresult, (int *version))      \
  X(cuGetErrorName, "cuGetErrorName", CUresult, (CUresult e, const char **s)) \
  X(cuGetErrorString, "cuGetErrorString", CUresult,                          \
    (CUresult e, const char **s))                                            \
  X(cuDeviceGetCount, "cuDeviceGetCount", CUresult, (int *count))            \
  X(cuDeviceGet, "cuDeviceGet", CUresult, (CUdevice * d, int ordinal))       \
  X(cuDeviceGetName, "cuDeviceGetName", CUresult,                            \
    (char *name, int len, CUdevice d))                                       \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult,                  \
    (int *v, int attrib, CUdevice d))                                        \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult,                       \
    (size_t * bytes, CUdevice d))                                            \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult,          \
    (CUcontext * ctx, CUdevice d))                                           \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", CUresult,     \
    (CUdevice d))                                                            \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult, (CUcontext ctx))           \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", CUresult, (CUcontext * ctx))         \
  X(cuCtxSynchronize, "cuCtxSynchronize", CUresult, (void))                  \
  X(cuMemGetInfo, "cuMemGetInfo_v2", CUresult, (size_t * free, size_t *total)) \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult, (CUdeviceptr * p, size_t n))      \
  X(cuMemFree, "cuMemFree_v2", CUresult, (CUdeviceptr p))                    \
  X(cuMemAllocAsync, "cuMemAllocAsync", CUresult,                            \
    (CUdeviceptr * p, size_t n, CUstream s))                                 \
  X(cuMemFreeAsync, "cuMemFreeAsync", CUresult, (CUdeviceptr p, CUstream s)) \
  X(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", CUresult,        \
    (CUmemoryPool * pool, CUdevice d))                                       \
  X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", CUresult,                \
    (CUmemoryPool pool, int attr, void *value))                              \
  X(cuMemPoolTrimTo, "cuMemPoolTrimTo", CUresult,                            \
    (CUmemoryPool pool, size_t keep))                                        \
  X(cuMemAllocHost, "cuMemAllocHost_v2", CUresult, (void **p, size_t n))     \
  X(cuMemFreeHost, "cuMemFreeHost", CUresult, (void *p))                     \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", CUresult,                     \
    (CUdeviceptr dst, const void *src, size_t n, CUstream s))                \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CUresult,                     \
    (void *dst, CUdeviceptr src, size_t n, CUstream s))                      \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", CUresult,                     \
    (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s))                \
  X(cuMemsetD8Async, "cuMemsetD8Async", CUresult,                            \
    (CUdeviceptr dst, unsigned char v, size_t n, CUstream s))                \
  X(cuMemsetD32Async, "cuMemsetD32Async", CUresult,                          \
    (CUdeviceptr dst, unsigned int v, size_t n, CUstream s))                 \
  X(cuStreamCreate, "cuStreamCreate", CUresult,                              \
    (CUstream * s, unsigned int flags))                                      \
  X(cuStreamDestroy, "cuStreamDestroy_v2", CUresult, (CUstream s))           \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult, (CUstream s))      \
  X(cuStreamWaitEvent, "cuStreamWaitEvent", CUresult,                        \
    (CUstream s, CUevent e, unsigned int flags))                             \
  X(cuEventCreate, "cuEventCreate", CUresult, (CUevent * e, unsigned int f)) \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult, (CUevent e))              \
  X(cuEventRecord, "cuEventRecord", CUresult, (CUevent e, CUstream s))       \
  X(cuEventSynchronize, "cuEventSynchronize", CUresult, (CUevent e))         \
  X(cuEventQuery, "cuEventQuery", CUresult, (CUevent e))                     \
  X(cuEventElapsedTime, "cuEventElapsedTime", CUresult,                      \
    (float *ms, CUevent a, CUevent b))                                       \
  X(cuModuleLoadData, "cuModuleLoadData", CUresult,                          \
    (CUmodule * m, const void *image))                                       \
  X(cuModuleUnload, "cuModuleUnload", CUresult, (CUmodule m))                \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult,                    \
    (CUfunction * f, CUmodule m, const char *name))                          \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult,                      \
    (CUfunction f, int attrib, int value))                                   \
  X(cuLaunchKernel, "cuLaunchKernel", CUresult,                              \
    (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,       \
     unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params,    \
     void **extra))                                                          \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", CUresult,               \
    (CUstream s, int mode))                                                  \
  X(cuStreamEndCapture, "cuStreamEndCapture", CUresult,                      \
    (CUstream s, CUgraph * g))                                               \
  X(cuStreamIsCapturing, "cuStreamIsCapturing", CUresult,                    \
    (CUstream s, int *status))                                               \
  X(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags", CUresult,    \
    (CUgraphExec * e, CUgraph g, unsigned long long flags))                  \
  X(cuGraphLaunch, "cuGraphLaunch", CUresult, (CUgraphExec e, CUstream s))   \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", CUresult, (CUgraphExec e))     \
  X(cuGraphDestroy, "cuGraphDestroy", CUresult, (CUgraph g))                 \
  X(cuDeviceGraphMemTrim, "cuDeviceGraphMemTrim", CUresult, (CUdevice d))

#define IRON_NVRTC_SYMBOLS(X)                                                \
  X(nvrtcVersion, "nvrtcVersion", nvrtcResult, (int *major, int *minor))     \
  X(nvrtcGetErrorString, "nvrtcGetErrorString", const char *,               \
    (nvrtcResult r))                                                         \
  X(nvrtcCreateProgram, "nvrtcCreateProgram", nvrtcResult,                   \
    (nvrtcProgram * p, const char *src, const char *name, int num_headers,   \
     const char *const *headers, const char *const *include_names))          \
  X(nvrtcDestroyProgram, "nvrtcDestroyProgram", nvrtcResult,                 \
    (nvrtcProgram * p))                                                      \
  X(nvrtcCompileProgram, "nvrtcCompileProgram", nvrtcResult,                 \
    (nvrtcProgram p, int num_options, const char *const *options))           \
  X(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", nvrtcResult,           \
    (nvrtcProgram p, size_t *n))                                             \
  X(nvrtcGetProgramLog, "nvrtcGetProgramLog", nvrtcResult,                   \
    (nvrtcProgram p, char *log))                                             \
  X(nvrtcGetCUBINSize, "nvrtcGetCUBINSize", nvrtcResult,                     \
    (nvrtcProgram p, size_t *n))                                             \
  X(nvrtcGetCUBIN, "nvrtcGetCUBIN", nvrtcResult, (nvrtcProgram p, char *out))

#define IRON_CUBLASLT_SYMBOLS(X)                                             \
  X(cublasLtGetVersion, "cublasLtGetVersion", size_t, (void))                \
  X(cublasLtCreate, "cublasLtCreate", cublasStatus_t, (cublasLtHandle_t * h)) \
  X(cublasLtDestroy, "cublasLtDestroy", cublasStatus_t, (cublasLtHandle_t h)) \
  X(cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate", cublasStatus_t,    \
    (cublasLtMatmulDesc_t * d, int compute_type, int scale_type))            \
  X(cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy", cublasStatus_t,  \
    (cublasLtMatmulDesc_t d))                                                \
  X(cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute",        \
    cublasStatus_t,                                                          \
    (cublasLtMatmulDesc_t d, int attr, const void *buf, size_t n))           \
  X(cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate", cublasStatus_t, \
    (cublasLtMatrixLayout_t * l, int type, uint64_t rows, uint64_t cols,     \
     int64_t ld))                                                            \
  X(cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy",              \
    cublasStatus_t, (cublasLtMatrixLayout_t l))                              \
  X(cublasLtMatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute",    \
    cublasStatus_t,                                                          \
    (cublasLtMatrixLayout_t l, int attr, const void *buf, size_t n))         \
  X(cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate",        \
    cublasStatus_t, (cublasLtMatmulPreference_t * p))                        \
  X(cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy",      \
    cublasStatus_t, (cublasLtMatmulPreference_t p))                          \
  X(cublasLtMatmulPreferenceSetAttribute,                                    \
    "cublasLtMatmulPreferenceSetAttribute", cublasStatus_t,                  \
    (cublasLtMatmulPreference_t p, int attr, const void *buf, size_t n))     \
  X(cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic",        \
    cublasStatus_t,                                                          \
    (cublasLtHandle_t h, cublasLtMatmulDesc_t d, cublasLtMatrixLayout_t a,   \
     cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,                     \
     cublasLtMatrixLayout_t dd, cublasLtMatmulPreference_t p, int requested, \
     cublasLtMatmulHeuristicResult_t *results, int *returned))               \
  X(cublasLtMatmul, "cublasLtMatmul", cublasStatus_t,                        \
    (cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,          \
     const void *a, cublasLtMatrixLayout_t la, const void *b,                \
     cublasLtMatrixLayout_t lb, const void *beta, const void *c,             \
     cublasLtMatrixLayout_t lc, void *dd, cublasLtMatrixLayout_t ld,         \
     const cublasLtMatmulAlgo_t *algo, void *workspace, size_t ws_size,      \
     CUstream s))

// cuFFT (loaded only when an fft is prepared: iron_cuda_api_get_cufft).
// Complex data are interleaved (re, im) pairs of float or double.
#define IRON_CUFFT_SYMBOLS(X)                                                \
  X(cufftGetVersion, "cufftGetVersion", cufftResult, (int *version))         \
  X(cufftCreate, "cufftCreate", cufftResult, (cufftHandle * plan))           \
  X(cufftDestroy, "cufftDestroy", cufftResult, (cufftHandle plan))           \
  X(cufftMakePlanMany64, "cufftMakePlanMany64", cufftResult,                 \
    (cufftHandle plan, int rank, long long *n, long long *inembed,           \
     long long istride, long long idist, long long *onembed,                 \
     long long ostride, long long odist, int type, long long batch,          \
     size_t *work_size))                                                     \
  X(cufftSetStream, "cufftSetStream", cufftResult,                           \
    (cufftHandle plan, CUstream s))                                          \
  X(cufftExecC2C, "cufftExecC2C", cufftResult,                               \
    (cufftHandle plan, void *in, void *out, int direction))                  \
  X(cufftExecR2C, "cufftExecR2C", cufftResult,                               \
    (cufftHandle plan, void *in, void *out))                                 \
  X(cufftExecC2R, "cufftExecC2R", cufftResult,                               \
    (cufftHandle plan, void *in, void *out))                                 \
  X(cufftExecZ2Z, "cufftExecZ2Z", cufftResult,                               \
    (cufftHandle plan, void *in, void *out, int direction))                  \
  X(cufftExecD2Z, "cufftExecD2Z", cufftResult,                               \
    (cufftHandle plan, void *in, void *out))                                 \
  X(cufftExecZ2D, "cufftExecZ2D", cufftResult,                               \
    (cufftHandle plan, void *in, void *out))

// Optional driver entry points: graph conditional nodes (CUDA >= 12.4 per
// the driver's version; the symbols appeared in 12.3). A driver without
// them loads all the same; has_conditional says whether all are there, and
// the CUDA device then runs data-dependent while loops host-driven
// (IRON_CUDA_DEVICE_WHILE, decided once at load).
#define IRON_CUDA_CONDITIONAL_SYMBOLS(X)                                     \
  X(cuGraphCreate, "cuGraphCreate", CUresult, (CUgraph * g, unsigned int f)) \
  X(cuGraphConditionalHandleCreate, "cuGraphConditionalHandleCreate",       \
    CUresult,                                                                \
    (CUgraphConditionalHandle * h, CUgraph g, CUcontext ctx,                 \
     unsigned int default_value, unsigned int flags))                        \
  X(cuGraphAddNode, "cuGraphAddNode_v2", CUresult,                           \
    (CUgraphNode * node, CUgraph g, const CUgraphNode *deps,                 \
     const void *edge_data, size_t num_deps, CUgraphNodeParams *params))     \
  X(cuStreamBeginCaptureToGraph, "cuStreamBeginCaptureToGraph", CUresult,    \
    (CUstream s, CUgraph g, const CUgraphNode *deps, const void *edge_data,  \
     size_t num_deps, int mode))                                             \
  X(cuThreadExchangeStreamCaptureMode, "cuThreadExchangeStreamCaptureMode",  \
    CUresult, (int *mode))

typedef struct iron_cuda_api {
#define IRON_CUDA_API_FIELD(field, sym, ret, params) ret(*field) params;
  IRON_CUDA_DRIVER_SYMBOLS(IRON_CUDA_API_FIELD)
  IRON_NVRTC_SYMBOLS(IRON_CUDA_API_FIELD)
  IRON_CUBLASLT_SYMBOLS(IRON_CUDA_API_FIELD)
#undef IRON_CUDA_API_FIELD
  bool has_driver, has_nvrtc, has_cublaslt;
  // Paths the libraries were loaded from (empty when absent).
  char driver_path[512], nvrtc_path[512], cublaslt_path[512];
  // Why a library is absent (empty when loaded).
  char driver_error[512], nvrtc_error[512], cublaslt_error[512];
  // --- Additions (cuda-convfft): cuFFT, loaded lazily ---
#define IRON_CUDA_API_FIELD(field, sym, ret, params) ret(*field) params;
  IRON_CUFFT_SYMBOLS(IRON_CUDA_API_FIELD)
#undef IRON_CUDA_API_FIELD
  bool has_cufft;
  char cufft_path[512], cufft_error[512];
  // --- Additions (devwhile): graph conditional nodes, optional ---
#define IRON_CUDA_API_FIELD(field, sym, ret, params) ret(*field) params;
  IRON_CUDA_CONDITIONAL_SYMBOLS(IRON_CUDA_API_FIELD)
#undef IRON_CUDA_API_FIELD
  // Every conditional symbol resolved and cuDriverGetVersion >= 12040.
  bool has_conditional;
} iron_cuda_api_t;

// The process-wide table, loaded on first call (thread-safe). Never fails:
// the has_* flags and *_error say what is there. Search order per library:
// $IRON_CUDA_LIB_DIR, the system loader path (dlopen by soname),
// $CUDA_HOME/lib64 and $CUDA_PATH/lib64, /usr/local/cuda/lib64, and the
// `nvidia/*/lib` directories of the running Python's site-packages
// (nvidia-*-cu12/cu13 wheels).
const iron_cuda_api_t *iron_cuda_api_get(void);

// The same table with only the driver part loaded so far (has_nvrtc and
// has_cublaslt may be false merely because nothing asked for them yet):
// enough to count GPUs without loading the large libraries.
const iron_cuda_api_t *iron_cuda_api_get_driver(void);

// OK when the driver, NVRTC and cuBLASLt are all loaded; otherwise
// FAILED_PRECONDITION naming each missing library or symbol and where it
// looked.
iron_status_t iron_cuda_api_require(const iron_cuda_api_t *api);

// For tests: loads the three libraries from the given file names/paths
// (NULL: the default search) into *out_api, without touching the
// process-wide table.
void iron_cuda_api_load_from(const char *driver, const char *nvrtc,
                             const char *cublaslt, iron_cuda_api_t *out_api);

// The process-wide table with cuFFT loaded too (first call loads it; the
// driver part as iron_cuda_api_get_driver). has_cufft / cufft_error say
// whether it is usable; same search path as the other libraries
// (libcufft.so.12 / .so.11 / .so).
const iron_cuda_api_t *iron_cuda_api_get_cufft(void);

// For tests: loads only cuFFT from `path` (NULL: the default search) into
// *out_api (zeroed first), without touching the process-wide table.
void iron_cuda_api_load_cufft_from(const char *path, iron_cuda_api_t *out_api);

// A cufftResult as a status naming the call (INTERNAL unless 0;
// RESOURCE_EXHAUSTED for CUFFT_ALLOC_FAILED).
iron_status_t iron_cuda_cufft_status(cufftResult r, const char *what);

// Opens a library the way the tables above are loaded: `explicit_path`
// alone when not NULL, else the first of `names` (NULL-terminated sonames)
// in the documented search order. Returns the dlopen handle (the caller
// keeps it open) or NULL with `error` naming the library (`what`), every
// place searched and the loader's last message; `out_path` gets where it
// was found. For the lazily loaded libraries of other files (cuDNN).
void *iron_cuda_api_open_library(const char *what, const char *const *names,
                                 const char *explicit_path, char *out_path,
                                 size_t path_cap, char *error,
                                 size_t error_cap);

// A CUresult as an iron_status_t: OK for 0, else INTERNAL (RESOURCE_EXHAUSTED
// for out of memory) with "<what>: CUDA_ERROR_X (description)".
iron_status_t iron_cuda_status(const iron_cuda_api_t *api, CUresult r,
                               const char *what);

// Whether `r` is a sticky fault of the context: an error the driver
// documents as leaving the process's CUDA state inconsistent, after which
// every later call returns it too ("To continue using CUDA, the process must
// be terminated and relaunched": ILLEGAL_ADDRESS, LAUNCH_FAILED, ASSERT,
// ILLEGAL_INSTRUCTION, MISALIGNED_ADDRESS, INVALID_ADDRESS_SPACE,
// INVALID_PC, HARDWARE_STACK_ERROR, LAUNCH_TIMEOUT, ECC_UNCORRECTABLE,
// NVLINK_UNCORRECTABLE, CONTAINED, TENSOR_MEMORY_LEAK, EXTERNAL_DEVICE,
// MPS_CLIENT_TERMINATED, CONTEXT_IS_DESTROYED), a driver that is gone
// (DEINITIALIZED) and UNKNOWN (nothing says the context survived it). Only
// these retire a device (cuda_device.h); every other error (out of memory,
// invalid value, launch out of resources, stream-capture errors, ...)
// fails the call that saw it and leaves the device usable.
bool iron_cuda_error_is_sticky(CUresult r);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_API_H_
