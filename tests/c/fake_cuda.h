// A fake CUDA driver for GPU-free tests of src/device/cuda/cuda_device.c
// (and of the executor's graph mode through it): an iron_cuda_api_t whose
// driver entries emulate one context, streams, stream-ordered memory and
// stream capture in host memory, with the rules of the real driver that
// matter for errors:
//
// - work enqueued on a stream runs at once (device memory is host memory);
// - while a stream is being captured, work enqueued on it by ANY thread is
//   recorded into the capture instead of running (cuStreamBeginCapture:
//   "all operations pushed into the stream will not be executed, but will
//   instead be captured into a graph"); copies from or to pageable host
//   memory cannot be captured;
// - cuStreamSynchronize of a capturing stream (from any thread) fails with
//   CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, as do
//   the capturing thread's unsafe calls (cuMemAlloc, cuCtxSynchronize, ...)
//   in THREAD_LOCAL mode; work on an invalidated capture fails with
//   CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, and cuStreamEndCapture then ends
//   the capture with that error and no graph;
// - a kernel marked `fault` leaves a sticky CUDA_ERROR_ILLEGAL_ADDRESS that
//   the next synchronization (and every later call) returns.
//
// Tests inject failures (fake_cuda.fail_*) and hooks (fake_cuda.on_dtoh:
// runs inside a device-to-host copy, after its capture check, as the real
// driver blocks there until the stream reaches the copy) and read counters.
// Kernels are fake_kernel_t pointers passed as CUfunction; each parameter
// is 8 bytes. One fake context per process (fake_cuda_reset between
// devices). Header-only: include it from one test file.
#ifndef IRON_TESTS_FAKE_CUDA_H_
#define IRON_TESTS_FAKE_CUDA_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/cuda/cuda_api.h"

typedef struct fake_kernel {
  const char *name;
  void (*fn)(const uint64_t *args);  // NULL: does nothing
  int nargs;
  bool fault;  // running it leaves a sticky CUDA_ERROR_ILLEGAL_ADDRESS
} fake_kernel_t;

enum { FAKE_MAX_ARGS = 8 };

typedef enum {
  FAKE_NODE_KERNEL,
  FAKE_NODE_COPY,  // dst <- src, n bytes (memcpy at replay)
  FAKE_NODE_SET8,
  FAKE_NODE_NOP,   // event record, free node
  FAKE_NODE_WHILE,  // a conditional WHILE node: `body` while the condition
} fake_node_kind_t;

// A conditional handle (cuGraphConditionalHandleCreate): the handle value
// is this struct's address, so a fake kernel can set it
// (fake_cuda_set_conditional, the stand-in of cudaGraphSetConditional).
typedef struct fake_cond {
  unsigned value, dflt;
  bool assign_default;
} fake_cond_t;
struct fake_graph;

typedef struct fake_node {
  fake_node_kind_t kind;
  const fake_kernel_t *k;
  uint64_t args[FAKE_MAX_ARGS];
  void *dst;
  const void *src;
  size_t n;
  unsigned char v;
  bool host_src;  // a copy from host memory (recorded H2D)
  struct fake_graph *body;  // WHILE: the body graph (owned by the node)
  CUgraph *body_out;        // WHILE: the array handed to cuGraphAddNode
  fake_cond_t *cond;        // WHILE: its condition
} fake_node_t;

typedef struct fake_graph {
  fake_node_t *nodes;
  size_t num_nodes, cap_nodes;
  void **allocs;  // graph memory (alloc nodes), freed with the graph
  size_t num_allocs, cap_allocs;
  fake_cond_t **conds;  // conditional handles created on this graph
  size_t num_conds;
} fake_graph_t;

typedef struct fake_stream {
  bool capturing, invalidated;
  bool to_graph;  // cuStreamBeginCaptureToGraph: the graph is the caller's
  pthread_t thread;
  int mode;
  fake_graph_t *graph;
} fake_stream_t;

typedef struct fake_cuda_state {
  pthread_mutex_t mu;
  CUresult sticky;  // a fault of the context (0: none)
  CUresult pending_fault;  // a fault not seen yet: sticky at the next wait
  // Injected failures: the next call of that kind returns the code (0:
  // none); each is consumed by one call.
  CUresult fail_launch, fail_alloc_async, fail_sync, fail_end_capture,
      fail_graph_launch;
  int oom_allocs;  // this many cuMemAllocAsync calls fail: out of memory
  // cuMemAllocAsync on a stream that is not capturing, from a thread whose
  // strict (global or thread-local) capture is open, is an unsafe call
  // (the driver's pool grows): STREAM_CAPTURE_UNSUPPORTED, the capture
  // invalidated, as the H200 did (a relaxed capture allows it).
  bool alloc_grows_pool;
  int alloc_grows_pool_skip;  // that many such allocations succeed first
  // Called inside cuMemcpyDtoHAsync / cuMemcpyHtoDAsync (not captured, no
  // lock held), e.g. to let another thread act while the copy "waits".
  void (*on_dtoh)(void);
  void (*on_htod)(void);
  // Pinned host ranges (cuMemAllocHost).
  void *pinned[64];
  size_t pinned_n[64];
  int num_pinned;
  // Counters.
  atomic_int syncs, capture_errors, captures_begun, captures_ended,
      graph_launches, launches, captured_host_copies, live_device_blocks,
      live_streams, graph_mem_trims;
  // Device loops: WHILE nodes run, body iterations run.
  atomic_int while_runs, while_iterations;
} fake_cuda_state_t;

static fake_cuda_state_t fake_cuda = {.mu = PTHREAD_MUTEX_INITIALIZER};
static _Thread_local CUcontext fake_tls_ctx;
// cuThreadExchangeStreamCaptureMode's mode of this thread (0: global).
static _Thread_local int fake_tls_capture_mode;

// --- helpers -------------------------------------------------------------

// Device memory is host memory 128 bytes into a larger block, so that it
// can never sit right after a storage header (device.c tells device memory
// from host storage by that address).
static void fake_dev_free_all(void);
static void fake_register_free_all(void) { atexit(fake_dev_free_all); }
// The header links the live blocks: a device retired by a sticky fault
// frees nothing (its context is gone), and those blocks go back at exit.
typedef struct fake_block {
  struct fake_block *prev, *next;
} fake_block_t;
static fake_block_t fake_blocks = {&fake_blocks, &fake_blocks};
static pthread_mutex_t fake_blocks_mu = PTHREAD_MUTEX_INITIALIZER;
static void fake_dev_free_all(void) {
  pthread_mutex_lock(&fake_blocks_mu);
  while (fake_blocks.next != &fake_blocks) {
    fake_block_t *b = fake_blocks.next;
    fake_blocks.next = b->next;
    free(b);
  }
  fake_blocks.prev = &fake_blocks;
  pthread_mutex_unlock(&fake_blocks_mu);
}
static void *fake_dev_malloc(size_t n) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, fake_register_free_all);
  fake_block_t *b = malloc(n + 128);
  if (!b) return NULL;
  // IRON_TEST_FAKE_POISON=1: new device memory holds garbage, as a GPU's
  // recycled memory does (malloc's fresh pages are zero and hide reads of
  // memory nothing wrote).
  static int poison = -1;
  if (poison < 0) {
    const char *e = getenv("IRON_TEST_FAKE_POISON");
    poison = e && e[0] && e[0] != '0';
  }
  if (poison) memset((char *)b + 128, 0xA5, n);
  pthread_mutex_lock(&fake_blocks_mu);
  b->next = &fake_blocks;
  b->prev = fake_blocks.prev;
  fake_blocks.prev->next = b;
  fake_blocks.prev = b;
  pthread_mutex_unlock(&fake_blocks_mu);
  return (char *)b + 128;
}
static void fake_dev_free(void *p) {
  if (!p) return;
  fake_block_t *b = (fake_block_t *)((char *)p - 128);
  pthread_mutex_lock(&fake_blocks_mu);
  b->prev->next = b->next;
  b->next->prev = b->prev;
  pthread_mutex_unlock(&fake_blocks_mu);
  free(b);
}

static bool fake_is_pinned(const void *p, size_t n) {
  for (int i = 0; i < fake_cuda.num_pinned; ++i) {
    const char *b = fake_cuda.pinned[i];
    if ((const char *)p >= b && (const char *)p + n <= b + fake_cuda.pinned_n[i])
      return true;
  }
  return false;
}

static fake_stream_t *fake_stream(CUstream s) { return (fake_stream_t *)s; }

static void fake_graph_free(fake_graph_t *g) {
  if (!g) return;
  for (size_t i = 0; i < g->num_nodes; ++i) {
    if (g->nodes[i].kind != FAKE_NODE_WHILE) continue;
    fake_graph_free(g->nodes[i].body);
    free(g->nodes[i].body_out);
  }
  for (size_t i = 0; i < g->num_conds; ++i) free(g->conds[i]);
  free(g->conds);
  for (size_t i = 0; i < g->num_allocs; ++i) {
    fake_dev_free(g->allocs[i]);
    atomic_fetch_sub(&fake_cuda.live_device_blocks, 1);
  }
  free(g->allocs);
  free(g->nodes);
  free(g);
}

static void fake_graph_add(fake_graph_t *g, const fake_node_t *n) {
  if (g->num_nodes == g->cap_nodes) {
    g->cap_nodes = g->cap_nodes ? 2 * g->cap_nodes : 16;
    g->nodes = realloc(g->nodes, g->cap_nodes * sizeof(*g->nodes));
  }
  g->nodes[g->num_nodes++] = *n;
}

static void fake_run_node(const fake_node_t *n);
static void fake_run_graph(const fake_graph_t *g) {
  for (size_t i = 0; i < g->num_nodes; ++i) fake_run_node(&g->nodes[i]);
}
static void fake_run_node(const fake_node_t *n) {
  switch (n->kind) {
    case FAKE_NODE_WHILE:
      atomic_fetch_add(&fake_cuda.while_runs, 1);
      if (n->cond->assign_default) n->cond->value = n->cond->dflt;
      for (long k = 0; n->cond->value && k < 100000000; ++k) {
        atomic_fetch_add(&fake_cuda.while_iterations, 1);
        fake_run_graph(n->body);
      }
      break;
    case FAKE_NODE_KERNEL:
      atomic_fetch_add(&fake_cuda.launches, 1);
      if (n->k->fault) {
        // Seen at the next wait, like a real asynchronous fault; launches
        // until then are accepted.
        fake_cuda.pending_fault = IRON_CU_ERROR_ILLEGAL_ADDRESS;
        return;
      }
      if (n->k->fn) n->k->fn(n->args);
      break;
    case FAKE_NODE_COPY: memmove(n->dst, n->src, n->n); break;
    case FAKE_NODE_SET8: memset(n->dst, n->v, n->n); break;
    case FAKE_NODE_NOP: break;
  }
}

// A wait reaches an earlier fault: it becomes the context's. mu held.
static void fake_see_fault_locked(void) {
  if (fake_cuda.pending_fault && !fake_cuda.sticky)
    fake_cuda.sticky = fake_cuda.pending_fault;
  fake_cuda.pending_fault = 0;
}

// Enqueues `n` on stream `s`: runs it, records it, or fails. mu held.
static CUresult fake_enqueue_locked(CUstream s, const fake_node_t *n) {
  if (fake_cuda.sticky) return fake_cuda.sticky;
  fake_stream_t *st = fake_stream(s);
  if (st && st->capturing) {
    if (st->invalidated) return IRON_CU_ERROR_STREAM_CAPTURE_INVALIDATED;
    fake_graph_add(st->graph, n);
    if (n->kind == FAKE_NODE_COPY && n->host_src)
      atomic_fetch_add(&fake_cuda.captured_host_copies, 1);
    return IRON_CU_SUCCESS;
  }
  fake_run_node(n);
  return IRON_CU_SUCCESS;
}

// Invalidates the capture of `s` with CAPTURE_UNSUPPORTED. mu held.
static CUresult fake_capture_violation_locked(fake_stream_t *st) {
  st->invalidated = true;
  atomic_fetch_add(&fake_cuda.capture_errors, 1);
  return IRON_CU_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

// --- driver entries --------------------------------------------------------

static CUresult fake_cuInit(unsigned int f) { (void)f; return 0; }
static CUresult fake_cuDriverGetVersion(int *v) { *v = 12080; return 0; }
static CUresult fake_cuGetErrorName(CUresult e, const char **s) {
  switch (e) {
    case 0: *s = "CUDA_SUCCESS"; return 0;
    case 1: *s = "CUDA_ERROR_INVALID_VALUE"; return 0;
    case 2: *s = "CUDA_ERROR_OUT_OF_MEMORY"; return 0;
    case 700: *s = "CUDA_ERROR_ILLEGAL_ADDRESS"; return 0;
    case 701: *s = "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"; return 0;
    case 719: *s = "CUDA_ERROR_LAUNCH_FAILED"; return 0;
    case 900: *s = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED"; return 0;
    case 901: *s = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED"; return 0;
    case 908: *s = "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD"; return 0;
    default: *s = NULL; return 1;
  }
}
static CUresult fake_cuGetErrorString(CUresult e, const char **s) {
  switch (e) {
    case 700: *s = "an illegal memory access was encountered"; return 0;
    case 900: *s = "operation not permitted when stream is capturing"; return 0;
    case 901:
      *s = "operation failed due to a previous error during capture";
      return 0;
    default: *s = "fake CUDA error"; return 0;
  }
}
static CUresult fake_cuDeviceGetCount(int *n) { *n = 1; return 0; }
static CUresult fake_cuDeviceGet(CUdevice *d, int o) { *d = o; return 0; }
static CUresult fake_cuDeviceGetName(char *name, int len, CUdevice d) {
  (void)d;
  strncpy(name, "Fake GPU", (size_t)len);
  return 0;
}
static CUresult fake_cuDeviceGetAttribute(int *v, int a, CUdevice d) {
  (void)d;
  switch (a) {
    case IRON_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *v = 9; break;
    case IRON_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *v = 0; break;
    case IRON_CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *v = 4; break;
    default: *v = 49152; break;
  }
  return 0;
}
static CUresult fake_cuDeviceTotalMem(size_t *b, CUdevice d) {
  (void)d;
  *b = (size_t)1 << 30;
  return 0;
}
static CUresult fake_cuDevicePrimaryCtxRetain(CUcontext *c, CUdevice d) {
  (void)d;
  *c = (CUcontext)(uintptr_t)0x1000;
  return 0;
}
static CUresult fake_cuDevicePrimaryCtxRelease(CUdevice d) { (void)d; return 0; }
static CUresult fake_cuCtxSetCurrent(CUcontext c) { fake_tls_ctx = c; return 0; }
static CUresult fake_cuCtxGetCurrent(CUcontext *c) { *c = fake_tls_ctx; return 0; }
static CUresult fake_cuMemGetInfo(size_t *f, size_t *t) {
  *f = *t = (size_t)1 << 30;
  return 0;
}

static fake_stream_t *g_fake_streams[16];
static int g_fake_num_streams;

// The stream the calling thread captures (THREAD_LOCAL), or NULL. mu held.
static fake_stream_t *fake_my_capture_locked(void) {
  for (int i = 0; i < g_fake_num_streams; ++i) {
    fake_stream_t *s = g_fake_streams[i];
    if (s && s->capturing && pthread_equal(s->thread, pthread_self()))
      return s;
  }
  return NULL;
}

static CUresult fake_unsafe(void) {
  pthread_mutex_lock(&fake_cuda.mu);
  fake_stream_t *s = fake_my_capture_locked();
  if (fake_tls_capture_mode == IRON_CU_STREAM_CAPTURE_MODE_RELAXED) s = NULL;
  CUresult r = s ? fake_capture_violation_locked(s) : fake_cuda.sticky;
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}

static CUresult fake_cuCtxSynchronize(void) {
  pthread_mutex_lock(&fake_cuda.mu);
  CUresult r = fake_cuda.sticky;
  for (int i = 0; i < g_fake_num_streams && !r; ++i)
    if (g_fake_streams[i] && g_fake_streams[i]->capturing)
      r = fake_capture_violation_locked(g_fake_streams[i]);
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuMemAlloc(CUdeviceptr *p, size_t n) {
  CUresult r = fake_unsafe();
  if (r) return r;
  void *m = fake_dev_malloc(n);
  if (!m) return IRON_CU_ERROR_OUT_OF_MEMORY;
  atomic_fetch_add(&fake_cuda.live_device_blocks, 1);
  *p = (CUdeviceptr)(uintptr_t)m;
  return 0;
}
static CUresult fake_cuMemFree(CUdeviceptr p) {
  CUresult r = fake_unsafe();
  if (r) return r;
  fake_dev_free((void *)(uintptr_t)p);
  atomic_fetch_sub(&fake_cuda.live_device_blocks, 1);
  return 0;
}
static CUresult fake_cuMemAllocAsync(CUdeviceptr *p, size_t n, CUstream s) {
  pthread_mutex_lock(&fake_cuda.mu);
  CUresult r = fake_cuda.sticky;
  if (!r && fake_cuda.fail_alloc_async) {
    r = fake_cuda.fail_alloc_async;
    fake_cuda.fail_alloc_async = 0;
  }
  if (!r && fake_cuda.oom_allocs > 0) {
    fake_cuda.oom_allocs--;
    r = IRON_CU_ERROR_OUT_OF_MEMORY;
  }
  fake_stream_t *st = fake_stream(s);
  if (!r && st->capturing && st->invalidated)
    r = IRON_CU_ERROR_STREAM_CAPTURE_INVALIDATED;
  if (!r && !st->capturing && fake_cuda.alloc_grows_pool) {
    fake_stream_t *mine = fake_my_capture_locked();
    if (mine && mine->mode != IRON_CU_STREAM_CAPTURE_MODE_RELAXED &&
        fake_tls_capture_mode != IRON_CU_STREAM_CAPTURE_MODE_RELAXED &&
        fake_cuda.alloc_grows_pool_skip-- <= 0)
      r = fake_capture_violation_locked(mine);
  }
  if (!r) {
    void *m = fake_dev_malloc(n);
    if (!m) {
      r = IRON_CU_ERROR_OUT_OF_MEMORY;
    } else {
      atomic_fetch_add(&fake_cuda.live_device_blocks, 1);
      *p = (CUdeviceptr)(uintptr_t)m;
      if (st->capturing) {  // an allocation node: the graph owns it
        fake_graph_t *g = st->graph;
        if (g->num_allocs == g->cap_allocs) {
          g->cap_allocs = g->cap_allocs ? 2 * g->cap_allocs : 16;
          g->allocs = realloc(g->allocs, g->cap_allocs * sizeof(void *));
        }
        g->allocs[g->num_allocs++] = m;
      }
    }
  }
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  pthread_mutex_lock(&fake_cuda.mu);
  fake_stream_t *st = fake_stream(s);
  CUresult r = fake_cuda.sticky;
  if (!r && st->capturing) {
    // A free node; graph memory is released with the graph.
    fake_node_t n = {.kind = FAKE_NODE_NOP};
    r = fake_enqueue_locked(s, &n);
  } else if (!r) {
    fake_dev_free((void *)(uintptr_t)p);
    atomic_fetch_sub(&fake_cuda.live_device_blocks, 1);
  }
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuDeviceGetDefaultMemPool(CUmemoryPool *p, CUdevice d) {
  (void)d;
  *p = (CUmemoryPool)(uintptr_t)0x2000;
  return 0;
}
static CUresult fake_cuMemPoolSetAttribute(CUmemoryPool p, int a, void *v) {
  (void)p;
  (void)a;
  (void)v;
  return 0;
}
static CUresult fake_cuMemAllocHost(void **p, size_t n) {
  CUresult r = fake_unsafe();
  if (r) return r;
  pthread_mutex_lock(&fake_cuda.mu);
  if (fake_cuda.num_pinned >= 64) {
    pthread_mutex_unlock(&fake_cuda.mu);
    return IRON_CU_ERROR_OUT_OF_MEMORY;
  }
  *p = malloc(n);
  fake_cuda.pinned[fake_cuda.num_pinned] = *p;
  fake_cuda.pinned_n[fake_cuda.num_pinned++] = n;
  pthread_mutex_unlock(&fake_cuda.mu);
  return 0;
}
static CUresult fake_cuMemFreeHost(void *p) {
  pthread_mutex_lock(&fake_cuda.mu);
  for (int i = 0; i < fake_cuda.num_pinned; ++i) {
    if (fake_cuda.pinned[i] != p) continue;
    fake_cuda.pinned[i] = fake_cuda.pinned[fake_cuda.num_pinned - 1];
    fake_cuda.pinned_n[i] = fake_cuda.pinned_n[fake_cuda.num_pinned - 1];
    fake_cuda.num_pinned--;
    break;
  }
  pthread_mutex_unlock(&fake_cuda.mu);
  free(p);
  return 0;
}

// A copy touching host memory: capturable only from pinned memory.
static CUresult fake_host_copy(CUstream s, void *dst, const void *src,
                               size_t n, bool to_device) {
  pthread_mutex_lock(&fake_cuda.mu);
  if (!to_device) fake_see_fault_locked();
  CUresult r = fake_cuda.sticky;
  fake_stream_t *st = fake_stream(s);
  const void *host = to_device ? src : dst;
  if (!r && st->capturing && !st->invalidated && !fake_is_pinned(host, n))
    r = fake_capture_violation_locked(st);
  bool capturing = st->capturing;
  pthread_mutex_unlock(&fake_cuda.mu);
  if (r) return r;
  if (!capturing) {
    // The real driver blocks here (pageable memory) until the stream
    // reaches the copy: let the test act meanwhile.
    void (*hook)(void) = to_device ? fake_cuda.on_htod : fake_cuda.on_dtoh;
    if (hook) hook();
  }
  fake_node_t node = {.kind = FAKE_NODE_COPY, .dst = dst, .src = src,
                      .n = n, .host_src = to_device};
  pthread_mutex_lock(&fake_cuda.mu);
  r = fake_enqueue_locked(s, &node);
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuMemcpyHtoDAsync(CUdeviceptr d, const void *s, size_t n,
                                       CUstream st) {
  return fake_host_copy(st, (void *)(uintptr_t)d, s, n, true);
}
static CUresult fake_cuMemcpyDtoHAsync(void *d, CUdeviceptr s, size_t n,
                                       CUstream st) {
  return fake_host_copy(st, d, (const void *)(uintptr_t)s, n, false);
}
static CUresult fake_cuMemcpyDtoDAsync(CUdeviceptr d, CUdeviceptr s, size_t n,
                                       CUstream st) {
  fake_node_t node = {.kind = FAKE_NODE_COPY, .dst = (void *)(uintptr_t)d,
                      .src = (const void *)(uintptr_t)s, .n = n};
  pthread_mutex_lock(&fake_cuda.mu);
  CUresult r = fake_enqueue_locked(st, &node);
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n,
                                     CUstream st) {
  fake_node_t node = {.kind = FAKE_NODE_SET8, .dst = (void *)(uintptr_t)d,
                      .v = v, .n = n};
  pthread_mutex_lock(&fake_cuda.mu);
  CUresult r = fake_enqueue_locked(st, &node);
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n,
                                      CUstream st) {
  (void)d;
  (void)v;
  (void)n;
  (void)st;
  return IRON_CU_ERROR_INVALID_VALUE;  // unused by the tests
}
static CUresult fake_cuStreamCreate(CUstream *s, unsigned int f) {
  (void)f;
  fake_stream_t *st = calloc(1, sizeof(*st));
  atomic_fetch_add(&fake_cuda.live_streams, 1);
  pthread_mutex_lock(&fake_cuda.mu);
  g_fake_streams[g_fake_num_streams++ % 16] = st;
  pthread_mutex_unlock(&fake_cuda.mu);
  *s = (CUstream)st;
  return 0;
}
static CUresult fake_cuStreamDestroy(CUstream s) {
  pthread_mutex_lock(&fake_cuda.mu);
  for (int i = 0; i < 16; ++i)
    if (g_fake_streams[i] == fake_stream(s)) g_fake_streams[i] = NULL;
  pthread_mutex_unlock(&fake_cuda.mu);
  fake_graph_free(fake_stream(s)->graph);
  free(s);
  atomic_fetch_sub(&fake_cuda.live_streams, 1);
  return 0;
}
static CUresult fake_cuStreamSynchronize(CUstream s) {
  atomic_fetch_add(&fake_cuda.syncs, 1);
  pthread_mutex_lock(&fake_cuda.mu);
  fake_stream_t *st = fake_stream(s);
  CUresult r = 0;
  fake_see_fault_locked();
  if (st->capturing)
    r = fake_capture_violation_locked(st);  // any thread: illegal
  else if (fake_cuda.fail_sync) {
    r = fake_cuda.fail_sync;
    fake_cuda.fail_sync = 0;
  } else {
    r = fake_cuda.sticky;
  }
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuStreamWaitEvent(CUstream s, CUevent e, unsigned f) {
  (void)s;
  (void)e;
  (void)f;
  return 0;
}
static CUresult fake_cuEventCreate(CUevent *e, unsigned f) {
  (void)f;
  *e = (CUevent)malloc(1);
  return 0;
}
static CUresult fake_cuEventDestroy(CUevent e) { free(e); return 0; }
static CUresult fake_cuEventRecord(CUevent e, CUstream s) {
  (void)e;
  fake_node_t node = {.kind = FAKE_NODE_NOP};
  pthread_mutex_lock(&fake_cuda.mu);
  CUresult r = fake_enqueue_locked(s, &node);
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuEventSynchronize(CUevent e) {
  (void)e;
  return fake_cuda.sticky;
}
static CUresult fake_cuEventQuery(CUevent e) {
  (void)e;
  return fake_cuda.sticky;
}
static CUresult fake_cuEventElapsedTime(float *ms, CUevent a, CUevent b) {
  (void)a;
  (void)b;
  *ms = 0;
  return 0;
}
static CUresult fake_cuModuleLoadData(CUmodule *m, const void *img) {
  (void)m;
  (void)img;
  return IRON_CU_ERROR_INVALID_VALUE;  // no modules on the fake driver
}
static CUresult fake_cuModuleUnload(CUmodule m) { (void)m; return 0; }
static CUresult fake_cuModuleGetFunction(CUfunction *f, CUmodule m,
                                         const char *n) {
  (void)f;
  (void)m;
  (void)n;
  return IRON_CU_ERROR_INVALID_VALUE;
}
static CUresult fake_cuFuncSetAttribute(CUfunction f, int a, int v) {
  (void)f;
  (void)a;
  (void)v;
  return 0;
}
static CUresult fake_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy,
                                    unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned shmem, CUstream s,
                                    void **params, void **extra) {
  (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shmem;
  (void)extra;
  const fake_kernel_t *k = (const fake_kernel_t *)f;
  fake_node_t node = {.kind = FAKE_NODE_KERNEL, .k = k};
  for (int i = 0; i < k->nargs && i < FAKE_MAX_ARGS; ++i)
    memcpy(&node.args[i], params[i], sizeof(uint64_t));
  pthread_mutex_lock(&fake_cuda.mu);
  CUresult r = fake_cuda.sticky;
  if (!r && fake_cuda.fail_launch) {
    r = fake_cuda.fail_launch;
    fake_cuda.fail_launch = 0;
    // A failure while capturing invalidates the capture, as the driver's.
    if (fake_stream(s)->capturing) fake_stream(s)->invalidated = true;
  }
  if (!r) r = fake_enqueue_locked(s, &node);
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuStreamBeginCapture(CUstream s, int mode) {
  pthread_mutex_lock(&fake_cuda.mu);
  fake_stream_t *st = fake_stream(s);
  CUresult r = fake_cuda.sticky;
  if (!r && st->capturing) r = IRON_CU_ERROR_INVALID_VALUE;
  if (!r) {
    st->capturing = true;
    st->invalidated = false;
    st->thread = pthread_self();
    st->mode = mode;
    st->graph = calloc(1, sizeof(fake_graph_t));
    atomic_fetch_add(&fake_cuda.captures_begun, 1);
  }
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuStreamEndCapture(CUstream s, CUgraph *g) {
  pthread_mutex_lock(&fake_cuda.mu);
  fake_stream_t *st = fake_stream(s);
  CUresult r = 0;
  *g = NULL;
  if (!st->capturing) {
    r = IRON_CU_ERROR_INVALID_VALUE;
  } else if (!pthread_equal(st->thread, pthread_self())) {
    r = IRON_CU_ERROR_STREAM_CAPTURE_WRONG_THREAD;  // capture goes on
  } else {
    st->capturing = false;
    atomic_fetch_add(&fake_cuda.captures_ended, 1);
    if (fake_cuda.fail_end_capture) {
      r = fake_cuda.fail_end_capture;
      fake_cuda.fail_end_capture = 0;
      if (!st->to_graph) fake_graph_free(st->graph);
    } else if (st->invalidated) {
      r = IRON_CU_ERROR_STREAM_CAPTURE_INVALIDATED;
      if (!st->to_graph) fake_graph_free(st->graph);
    } else {
      *g = (CUgraph)st->graph;
    }
    st->graph = NULL;
    st->invalidated = false;
    st->to_graph = false;
  }
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuStreamIsCapturing(CUstream s, int *status) {
  pthread_mutex_lock(&fake_cuda.mu);
  fake_stream_t *st = fake_stream(s);
  *status = !st->capturing ? IRON_CU_STREAM_CAPTURE_STATUS_NONE
            : st->invalidated ? IRON_CU_STREAM_CAPTURE_STATUS_INVALIDATED
                              : IRON_CU_STREAM_CAPTURE_STATUS_ACTIVE;
  pthread_mutex_unlock(&fake_cuda.mu);
  return 0;
}
// Instantiating moves the nodes and the graph memory into the executable.
// Whether a conditional body (recursively) holds allocation nodes, which
// the driver refuses there.
static bool fake_bodies_allocate(const fake_graph_t *g, bool is_body) {
  if (is_body && g->num_allocs) return true;
  for (size_t i = 0; i < g->num_nodes; ++i)
    if (g->nodes[i].kind == FAKE_NODE_WHILE &&
        fake_bodies_allocate(g->nodes[i].body, true))
      return true;
  return false;
}
static CUresult fake_cuGraphInstantiateWithFlags(CUgraphExec *e, CUgraph g,
                                                 unsigned long long f) {
  (void)f;
  fake_graph_t *src = (fake_graph_t *)g;
  if (fake_bodies_allocate(src, false)) return IRON_CU_ERROR_INVALID_VALUE;
  fake_graph_t *x = calloc(1, sizeof(*x));
  *x = *src;
  memset(src, 0, sizeof(*src));
  *e = (CUgraphExec)x;
  return 0;
}
static CUresult fake_cuGraphLaunch(CUgraphExec e, CUstream s) {
  atomic_fetch_add(&fake_cuda.graph_launches, 1);
  fake_graph_t *x = (fake_graph_t *)e;
  pthread_mutex_lock(&fake_cuda.mu);
  CUresult r = fake_cuda.sticky;
  if (!r && fake_cuda.fail_graph_launch) {
    r = fake_cuda.fail_graph_launch;  // nothing of the graph runs
    fake_cuda.fail_graph_launch = 0;
  }
  if (!r && fake_stream(s)->capturing) r = IRON_CU_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < x->num_nodes && !r; ++i) {
    fake_run_node(&x->nodes[i]);
  }
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuDeviceGraphMemTrim(CUdevice d) {
  (void)d;
  atomic_fetch_add(&fake_cuda.graph_mem_trims, 1);
  return 0;
}
static CUresult fake_cuGraphExecDestroy(CUgraphExec e) {
  fake_graph_free((fake_graph_t *)e);
  return 0;
}
static CUresult fake_cuGraphDestroy(CUgraph g) {
  fake_graph_free((fake_graph_t *)g);
  return 0;
}

// --- conditional nodes (CUDA 12.4) ---------------------------------------
static CUresult fake_cuGraphCreate(CUgraph *g, unsigned f) {
  (void)f;
  *g = (CUgraph)calloc(1, sizeof(fake_graph_t));
  return 0;
}
static CUresult fake_cuGraphConditionalHandleCreate(
    CUgraphConditionalHandle *h, CUgraph g, CUcontext ctx, unsigned dflt,
    unsigned flags) {
  (void)ctx;
  fake_graph_t *fg = (fake_graph_t *)g;
  fake_cond_t *c = calloc(1, sizeof(*c));
  c->dflt = dflt;
  c->assign_default = flags & IRON_CU_GRAPH_COND_ASSIGN_DEFAULT;
  fg->conds = realloc(fg->conds, (fg->num_conds + 1) * sizeof(*fg->conds));
  fg->conds[fg->num_conds++] = c;
  *h = (CUgraphConditionalHandle)(uintptr_t)c;
  return 0;
}
static CUresult fake_cuGraphAddNode(CUgraphNode *node, CUgraph g,
                                    const CUgraphNode *deps,
                                    const void *edge_data, size_t num_deps,
                                    CUgraphNodeParams *p) {
  (void)deps;
  (void)edge_data;
  (void)num_deps;
  if (p->type != IRON_CU_GRAPH_NODE_TYPE_CONDITIONAL ||
      p->u.conditional.type != IRON_CU_GRAPH_COND_TYPE_WHILE ||
      p->u.conditional.size != 1 || p->reserved2 != 0)
    return IRON_CU_ERROR_INVALID_VALUE;
  fake_node_t n = {.kind = FAKE_NODE_WHILE};
  n.body = calloc(1, sizeof(fake_graph_t));
  n.body_out = calloc(1, sizeof(CUgraph));
  n.body_out[0] = (CUgraph)n.body;
  n.cond = (fake_cond_t *)(uintptr_t)p->u.conditional.handle;
  fake_graph_add((fake_graph_t *)g, &n);
  p->u.conditional.graphs_out = n.body_out;
  *node = (CUgraphNode)n.body;
  return 0;
}
static CUresult fake_cuStreamBeginCaptureToGraph(CUstream s, CUgraph g,
                                                 const CUgraphNode *deps,
                                                 const void *edge_data,
                                                 size_t num_deps, int mode) {
  (void)deps;
  (void)edge_data;
  (void)num_deps;
  pthread_mutex_lock(&fake_cuda.mu);
  fake_stream_t *st = fake_stream(s);
  CUresult r = fake_cuda.sticky;
  if (!r && st->capturing) r = IRON_CU_ERROR_INVALID_VALUE;
  if (!r) {
    st->capturing = true;
    st->invalidated = false;
    st->to_graph = true;
    st->thread = pthread_self();
    st->mode = mode;
    st->graph = (fake_graph_t *)g;
    atomic_fetch_add(&fake_cuda.captures_begun, 1);
  }
  pthread_mutex_unlock(&fake_cuda.mu);
  return r;
}
static CUresult fake_cuThreadExchangeStreamCaptureMode(int *mode) {
  int old = fake_tls_capture_mode;
  fake_tls_capture_mode = *mode;
  *mode = old;
  return 0;
}
// What a set-condition kernel calls: args[0] the pred (1 byte), args[1]
// the handle.
static inline void fake_cuda_set_conditional(const uint64_t *args) {
  const unsigned char *pred = (const unsigned char *)(uintptr_t)args[0];
  ((fake_cond_t *)(uintptr_t)args[1])->value = pred[0] != 0;
}
// Gives `api` the conditional-node entry points (a CUDA >= 12.4 driver).
static inline void fake_cuda_api_conditional(iron_cuda_api_t *api) {
  api->cuGraphCreate = fake_cuGraphCreate;
  api->cuGraphConditionalHandleCreate = fake_cuGraphConditionalHandleCreate;
  api->cuGraphAddNode = fake_cuGraphAddNode;
  api->cuStreamBeginCaptureToGraph = fake_cuStreamBeginCaptureToGraph;
  api->cuThreadExchangeStreamCaptureMode =
      fake_cuThreadExchangeStreamCaptureMode;
  api->has_conditional = true;
}

// The fake driver as an API table (NVRTC and cuBLASLt absent).
static void fake_cuda_api(iron_cuda_api_t *api) {
  memset(api, 0, sizeof(*api));
#define FAKE_SET(field) api->field = fake_##field;
  FAKE_SET(cuInit) FAKE_SET(cuDriverGetVersion) FAKE_SET(cuGetErrorName)
  FAKE_SET(cuGetErrorString) FAKE_SET(cuDeviceGetCount) FAKE_SET(cuDeviceGet)
  FAKE_SET(cuDeviceGetName) FAKE_SET(cuDeviceGetAttribute)
  FAKE_SET(cuDeviceTotalMem) FAKE_SET(cuDevicePrimaryCtxRetain)
  FAKE_SET(cuDevicePrimaryCtxRelease) FAKE_SET(cuCtxSetCurrent)
  FAKE_SET(cuCtxGetCurrent) FAKE_SET(cuCtxSynchronize) FAKE_SET(cuMemGetInfo)
  FAKE_SET(cuMemAlloc) FAKE_SET(cuMemFree) FAKE_SET(cuMemAllocAsync)
  FAKE_SET(cuMemFreeAsync) FAKE_SET(cuDeviceGetDefaultMemPool)
  FAKE_SET(cuMemPoolSetAttribute) FAKE_SET(cuMemAllocHost)
  FAKE_SET(cuMemFreeHost) FAKE_SET(cuMemcpyHtoDAsync)
  FAKE_SET(cuMemcpyDtoHAsync) FAKE_SET(cuMemcpyDtoDAsync)
  FAKE_SET(cuMemsetD8Async) FAKE_SET(cuMemsetD32Async) FAKE_SET(cuStreamCreate)
  FAKE_SET(cuStreamDestroy) FAKE_SET(cuStreamSynchronize)
  FAKE_SET(cuStreamWaitEvent) FAKE_SET(cuEventCreate) FAKE_SET(cuEventDestroy)
  FAKE_SET(cuEventRecord) FAKE_SET(cuEventSynchronize) FAKE_SET(cuEventQuery)
  FAKE_SET(cuEventElapsedTime) FAKE_SET(cuModuleLoadData)
  FAKE_SET(cuModuleUnload) FAKE_SET(cuModuleGetFunction)
  FAKE_SET(cuFuncSetAttribute) FAKE_SET(cuLaunchKernel)
  FAKE_SET(cuStreamBeginCapture) FAKE_SET(cuStreamEndCapture)
  FAKE_SET(cuStreamIsCapturing) FAKE_SET(cuGraphInstantiateWithFlags)
  FAKE_SET(cuGraphLaunch) FAKE_SET(cuGraphExecDestroy) FAKE_SET(cuGraphDestroy)
  FAKE_SET(cuDeviceGraphMemTrim)
#undef FAKE_SET
  api->has_driver = true;
  snprintf(api->driver_path, sizeof(api->driver_path), "fake_cuda.h");
}

// Clears faults, injections, hooks and counters (between devices).
static void fake_cuda_reset(void) {
  pthread_mutex_lock(&fake_cuda.mu);
  fake_cuda.sticky = fake_cuda.pending_fault = 0;
  fake_cuda.fail_launch = fake_cuda.fail_alloc_async = 0;
  fake_cuda.fail_sync = fake_cuda.fail_end_capture = 0;
  fake_cuda.fail_graph_launch = 0;
  fake_cuda.oom_allocs = 0;
  fake_cuda.alloc_grows_pool = false;
  fake_cuda.alloc_grows_pool_skip = 0;
  fake_cuda.on_dtoh = fake_cuda.on_htod = NULL;
  atomic_store(&fake_cuda.syncs, 0);
  atomic_store(&fake_cuda.capture_errors, 0);
  atomic_store(&fake_cuda.captures_begun, 0);
  atomic_store(&fake_cuda.captures_ended, 0);
  atomic_store(&fake_cuda.graph_launches, 0);
  atomic_store(&fake_cuda.launches, 0);
  atomic_store(&fake_cuda.captured_host_copies, 0);
  atomic_store(&fake_cuda.while_runs, 0);
  atomic_store(&fake_cuda.while_iterations, 0);
  pthread_mutex_unlock(&fake_cuda.mu);
}

// Whether stream `s` is capturing (for checks that a capture was ended).
static bool fake_cuda_capturing(CUstream s) {
  pthread_mutex_lock(&fake_cuda.mu);
  bool c = fake_stream(s)->capturing;
  pthread_mutex_unlock(&fake_cuda.mu);
  return c;
}

#endif  // IRON_TESTS_FAKE_CUDA_H_
