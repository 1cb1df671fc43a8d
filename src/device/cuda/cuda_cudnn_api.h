// cuDNN 9, loaded at run time like the other CUDA libraries (cuda_api.h):
// our own declarations of the few types, enum values and entry points the
// convolution path calls (cuda_cudnn.c), so the plugin builds without
// cuDNN's headers and runs without cuDNN. Names and values are those of
// cudnn_graph.h / cudnn_ops.h / cudnn_cnn.h of cuDNN 9 (the legacy
// convolution API: still exported by 9.x, marked deprecated there).
//
// Each X-macro row is X(field, "exported symbol", return type, (params)).
// The library is loaded on the first convolution a CUDA device prepares
// (iron_cudnn_api_get), from the same places as libcublasLt:
// $IRON_CUDA_LIB_DIR, the system loader path, $CUDA_HOME/lib64,
// $CUDA_PATH/lib64, /usr/local/cuda/lib64 and the nvidia/*/lib folders of
// the running Python's site-packages (the nvidia-cudnn-cu12/cu13 wheels).
// A missing library, symbol or an unsupported version is not an error:
// has_cudnn is false and `error` says why (convolutions keep the CUDA
// device's own kernels).
#ifndef IRON_DEVICE_CUDA_CUDA_CUDNN_API_H_
#define IRON_DEVICE_CUDA_CUDA_CUDNN_API_H_

#include <stdbool.h>
#include <stddef.h>

#include "device/cuda/cuda_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef int cudnnStatus_t;  // 0 == CUDNN_STATUS_SUCCESS
typedef struct cudnnContext *cudnnHandle_t;
typedef struct cudnnTensorStruct *cudnnTensorDescriptor_t;
typedef struct cudnnFilterStruct *cudnnFilterDescriptor_t;
typedef struct cudnnConvolutionStruct *cudnnConvolutionDescriptor_t;

// cudnnConvolutionFwdAlgoPerf_t, cudnnConvolutionBwdDataAlgoPerf_t and
// cudnnConvolutionBwdFilterAlgoPerf_t share this layout (48 bytes: the
// algorithm enum, status, time in ms, workspace bytes, determinism, math
// type, 3 reserved ints).
typedef struct iron_cudnn_algo_perf {
  int algo;
  cudnnStatus_t status;
  float time;
  size_t memory;
  int determinism;  // IRON_CUDNN_DETERMINISTIC or not
  int mathType;     // IRON_CUDNN_*_MATH
  int reserved[3];
} iron_cudnn_algo_perf_t;

enum {
  // cudnnStatus_t
  IRON_CUDNN_STATUS_SUCCESS = 0,
  IRON_CUDNN_STATUS_NOT_INITIALIZED = 1001,
  IRON_CUDNN_STATUS_BAD_PARAM = 2000,
  IRON_CUDNN_STATUS_NOT_SUPPORTED = 3000,
  IRON_CUDNN_STATUS_EXECUTION_FAILED = 5000,
  // cudnnDataType_t
  IRON_CUDNN_DATA_FLOAT = 0,
  IRON_CUDNN_DATA_DOUBLE = 1,
  IRON_CUDNN_DATA_HALF = 2,
  IRON_CUDNN_DATA_BFLOAT16 = 9,
  // cudnnMathType_t
  IRON_CUDNN_DEFAULT_MATH = 0,
  IRON_CUDNN_TENSOR_OP_MATH = 1,
  IRON_CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION = 2,
  IRON_CUDNN_FMA_MATH = 3,
  // cudnnTensorFormat_t (filters: KCRS or KRSC, dense)
  IRON_CUDNN_TENSOR_NCHW = 0,
  IRON_CUDNN_TENSOR_NHWC = 1,
  // cudnnConvolutionMode_t
  IRON_CUDNN_CONVOLUTION = 0,
  IRON_CUDNN_CROSS_CORRELATION = 1,
  // cudnnDeterminism_t
  IRON_CUDNN_NON_DETERMINISTIC = 0,
  IRON_CUDNN_DETERMINISTIC = 1,
  // cudnnConvolutionFwdAlgo_t
  IRON_CUDNN_FWD_ALGO_IMPLICIT_GEMM = 0,
  IRON_CUDNN_FWD_ALGO_IMPLICIT_PRECOMP_GEMM = 1,
  IRON_CUDNN_FWD_ALGO_GEMM = 2,
  IRON_CUDNN_FWD_ALGO_DIRECT = 3,
  IRON_CUDNN_FWD_ALGO_FFT = 4,
  IRON_CUDNN_FWD_ALGO_FFT_TILING = 5,
  IRON_CUDNN_FWD_ALGO_WINOGRAD = 6,
  IRON_CUDNN_FWD_ALGO_WINOGRAD_NONFUSED = 7,
  IRON_CUDNN_FWD_ALGO_COUNT = 8,
  // cudnnConvolutionBwdDataAlgo_t
  IRON_CUDNN_BWD_DATA_ALGO_0 = 0,
  IRON_CUDNN_BWD_DATA_ALGO_1 = 1,
  IRON_CUDNN_BWD_DATA_ALGO_COUNT = 6,
  // cudnnConvolutionBwdFilterAlgo_t
  IRON_CUDNN_BWD_FILTER_ALGO_0 = 0,
  IRON_CUDNN_BWD_FILTER_ALGO_1 = 1,
  IRON_CUDNN_BWD_FILTER_ALGO_3 = 3,
  IRON_CUDNN_BWD_FILTER_ALGO_COUNT = 7,
  // CUDNN_DIM_MAX
  IRON_CUDNN_DIM_MAX = 8,
};

#define IRON_CUDNN_SYMBOLS(X)                                                \
  X(cudnnGetVersion, "cudnnGetVersion", size_t, (void))                      \
  X(cudnnGetErrorString, "cudnnGetErrorString", const char *,               \
    (cudnnStatus_t s))                                                       \
  X(cudnnGetLastErrorString, "cudnnGetLastErrorString", void,               \
    (char *message, size_t max_size))                                        \
  X(cudnnCreate, "cudnnCreate", cudnnStatus_t, (cudnnHandle_t * h))          \
  X(cudnnDestroy, "cudnnDestroy", cudnnStatus_t, (cudnnHandle_t h))          \
  X(cudnnSetStream, "cudnnSetStream", cudnnStatus_t,                         \
    (cudnnHandle_t h, CUstream s))                                           \
  X(cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor",              \
    cudnnStatus_t, (cudnnTensorDescriptor_t * d))                            \
  X(cudnnDestroyTensorDescriptor, "cudnnDestroyTensorDescriptor",            \
    cudnnStatus_t, (cudnnTensorDescriptor_t d))                              \
  X(cudnnSetTensorNdDescriptor, "cudnnSetTensorNdDescriptor", cudnnStatus_t, \
    (cudnnTensorDescriptor_t d, int data_type, int nd, const int *dims,      \
     const int *strides))                                                    \
  X(cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor",              \
    cudnnStatus_t, (cudnnFilterDescriptor_t * d))                            \
  X(cudnnDestroyFilterDescriptor, "cudnnDestroyFilterDescriptor",            \
    cudnnStatus_t, (cudnnFilterDescriptor_t d))                              \
  X(cudnnSetFilterNdDescriptor, "cudnnSetFilterNdDescriptor", cudnnStatus_t, \
    (cudnnFilterDescriptor_t d, int data_type, int format, int nd,           \
     const int *dims))                                                       \
  X(cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor",    \
    cudnnStatus_t, (cudnnConvolutionDescriptor_t * d))                       \
  X(cudnnDestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor",  \
    cudnnStatus_t, (cudnnConvolutionDescriptor_t d))                         \
  X(cudnnSetConvolutionNdDescriptor, "cudnnSetConvolutionNdDescriptor",      \
    cudnnStatus_t,                                                           \
    (cudnnConvolutionDescriptor_t d, int nsp, const int *pad,                \
     const int *stride, const int *dilation, int mode, int compute_type))    \
  X(cudnnSetConvolutionGroupCount, "cudnnSetConvolutionGroupCount",          \
    cudnnStatus_t, (cudnnConvolutionDescriptor_t d, int groups))             \
  X(cudnnSetConvolutionMathType, "cudnnSetConvolutionMathType",              \
    cudnnStatus_t, (cudnnConvolutionDescriptor_t d, int math_type))          \
  X(cudnnGetConvolutionNdForwardOutputDim,                                   \
    "cudnnGetConvolutionNdForwardOutputDim", cudnnStatus_t,                  \
    (cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t x,              \
     cudnnFilterDescriptor_t w, int nd, int *out_dims))                      \
  X(cudnnGetConvolutionForwardAlgorithm_v7,                                  \
    "cudnnGetConvolutionForwardAlgorithm_v7", cudnnStatus_t,                 \
    (cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,  \
     cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y,              \
     int requested, int *returned, iron_cudnn_algo_perf_t *perf))            \
  X(cudnnFindConvolutionForwardAlgorithmEx,                                  \
    "cudnnFindConvolutionForwardAlgorithmEx", cudnnStatus_t,                 \
    (cudnnHandle_t h, cudnnTensorDescriptor_t xd, const void *x,             \
     cudnnFilterDescriptor_t wd, const void *w,                              \
     cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t yd, void *y,    \
     int requested, int *returned, iron_cudnn_algo_perf_t *perf, void *ws,   \
     size_t ws_size))                                                        \
  X(cudnnGetConvolutionForwardWorkspaceSize,                                 \
    "cudnnGetConvolutionForwardWorkspaceSize", cudnnStatus_t,                \
    (cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnFilterDescriptor_t w,  \
     cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t y, int algo,    \
     size_t *size))                                                          \
  X(cudnnConvolutionForward, "cudnnConvolutionForward", cudnnStatus_t,       \
    (cudnnHandle_t h, const void *alpha, cudnnTensorDescriptor_t xd,         \
     const void *x, cudnnFilterDescriptor_t wd, const void *w,               \
     cudnnConvolutionDescriptor_t c, int algo, void *ws, size_t ws_size,     \
     const void *beta, cudnnTensorDescriptor_t yd, void *y))                 \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7,                             \
    "cudnnGetConvolutionBackwardDataAlgorithm_v7", cudnnStatus_t,            \
    (cudnnHandle_t h, cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy, \
     cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t dx,             \
     int requested, int *returned, iron_cudnn_algo_perf_t *perf))            \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx,                             \
    "cudnnFindConvolutionBackwardDataAlgorithmEx", cudnnStatus_t,            \
    (cudnnHandle_t h, cudnnFilterDescriptor_t wd, const void *w,             \
     cudnnTensorDescriptor_t dyd, const void *dy,                            \
     cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t dxd, void *dx,  \
     int requested, int *returned, iron_cudnn_algo_perf_t *perf, void *ws,   \
     size_t ws_size))                                                        \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize,                            \
    "cudnnGetConvolutionBackwardDataWorkspaceSize", cudnnStatus_t,           \
    (cudnnHandle_t h, cudnnFilterDescriptor_t w, cudnnTensorDescriptor_t dy, \
     cudnnConvolutionDescriptor_t c, cudnnTensorDescriptor_t dx, int algo,   \
     size_t *size))                                                          \
  X(cudnnConvolutionBackwardData, "cudnnConvolutionBackwardData",            \
    cudnnStatus_t,                                                           \
    (cudnnHandle_t h, const void *alpha, cudnnFilterDescriptor_t wd,         \
     const void *w, cudnnTensorDescriptor_t dyd, const void *dy,             \
     cudnnConvolutionDescriptor_t c, int algo, void *ws, size_t ws_size,     \
     const void *beta, cudnnTensorDescriptor_t dxd, void *dx))               \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7,                           \
    "cudnnGetConvolutionBackwardFilterAlgorithm_v7", cudnnStatus_t,          \
    (cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy, \
     cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t dw,             \
     int requested, int *returned, iron_cudnn_algo_perf_t *perf))            \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx,                           \
    "cudnnFindConvolutionBackwardFilterAlgorithmEx", cudnnStatus_t,          \
    (cudnnHandle_t h, cudnnTensorDescriptor_t xd, const void *x,             \
     cudnnTensorDescriptor_t dyd, const void *dy,                            \
     cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t dwd, void *dw,  \
     int requested, int *returned, iron_cudnn_algo_perf_t *perf, void *ws,   \
     size_t ws_size))                                                        \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize,                          \
    "cudnnGetConvolutionBackwardFilterWorkspaceSize", cudnnStatus_t,         \
    (cudnnHandle_t h, cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t dy, \
     cudnnConvolutionDescriptor_t c, cudnnFilterDescriptor_t dw, int algo,   \
     size_t *size))                                                          \
  X(cudnnConvolutionBackwardFilter, "cudnnConvolutionBackwardFilter",        \
    cudnnStatus_t,                                                           \
    (cudnnHandle_t h, const void *alpha, cudnnTensorDescriptor_t xd,         \
     const void *x, cudnnTensorDescriptor_t dyd, const void *dy,             \
     cudnnConvolutionDescriptor_t c, int algo, void *ws, size_t ws_size,     \
     const void *beta, cudnnFilterDescriptor_t dwd, void *dw))

typedef struct iron_cudnn_api {
#define IRON_CUDNN_API_FIELD(field, sym, ret, params) ret(*field) params;
  IRON_CUDNN_SYMBOLS(IRON_CUDNN_API_FIELD)
#undef IRON_CUDNN_API_FIELD
  bool has_cudnn;
  size_t version;  // cudnnGetVersion(): 9xxyy for 9.xx.yy
  char path[512];  // where it was loaded from (empty when absent)
  char error[768]; // why it is absent (empty when loaded)
} iron_cudnn_api_t;

// The process-wide table, loaded on the first call (thread-safe). Never
// fails: has_cudnn and error say what is there. cuDNN 9 only
// (libcudnn.so.9; another major version is refused by its version).
const iron_cudnn_api_t *iron_cudnn_api_get(void);

// For tests: loads cuDNN from `path` (NULL: the default search) into
// *out_api (zeroed first), without touching the process-wide table.
void iron_cudnn_api_load_from(const char *path, iron_cudnn_api_t *out_api);

// Checks a filled table: every entry point present and a cuDNN 9 version.
// On failure has_cudnn is false and `error` says why (tests give it fake
// tables). Sets version.
void iron_cudnn_api_check(iron_cudnn_api_t *api);

// A cudnnStatus_t as a status naming the call: OK for 0, else INTERNAL
// (RESOURCE_EXHAUSTED for allocation failures) with cuDNN's name for the
// code.
iron_status_t iron_cudnn_status(const iron_cudnn_api_t *api, cudnnStatus_t s,
                                const char *what);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_CUDNN_API_H_
