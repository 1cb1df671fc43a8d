// Kernel trace for the GPU benchmarks (bench/gpu_bench.py --trace).
//
// Collects CUPTI activity records of every kernel, memcpy and memset that
// runs in this process, whoever launched it (iron, XLA:GPU or PyTorch), so
// the three frameworks are measured by one instrument: kernels per step,
// kernel time per step, and how long the GPU sat idle inside a step. Records
// include kernels replayed from CUDA graphs (one record per node).
//
// Built by gpu_bench.py on the GPU machine against that machine's CUPTI
// header and library (record layouts are versioned with CUPTI), loaded
// through ctypes. Not part of the plugin.
#define _POSIX_C_SOURCE 200809L
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define KT_BUFFER_BYTES (8u << 20)

typedef struct {
  uint64_t start, end;
  uint32_t kind;  // 0 kernel, 1 memcpy, 2 memset
  uint32_t name;  // index into g_names (kernels only)
} kt_rec_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static kt_rec_t *g_recs;
static size_t g_num, g_cap;
// Kernel names, interned by CUPTI's pointer (CUPTI shares one string per
// kernel); copied so they outlive the activity buffers.
static const char **g_name_ptr;
static char **g_names;
static size_t g_num_names, g_cap_names;
static uint64_t g_dropped;

static uint32_t intern(const char *name) {
  for (size_t i = g_num_names; i-- > 0;)
    if (g_name_ptr[i] == name) return (uint32_t)i;
  if (g_num_names == g_cap_names) {
    size_t cap = g_cap_names ? 2 * g_cap_names : 256;
    const char **p = realloc(g_name_ptr, cap * sizeof(*p));
    if (!p) return UINT32_MAX;
    g_name_ptr = p;
    char **q = realloc(g_names, cap * sizeof(*q));
    if (!q) return UINT32_MAX;
    g_names = q;
    g_cap_names = cap;
  }
  g_name_ptr[g_num_names] = name;
  g_names[g_num_names] = strdup(name ? name : "?");
  return (uint32_t)g_num_names++;
}

static void push(uint64_t start, uint64_t end, uint32_t kind, uint32_t name) {
  if (g_num == g_cap) {
    size_t cap = g_cap ? 2 * g_cap : 65536;
    kt_rec_t *r = realloc(g_recs, cap * sizeof(*r));
    if (!r) {
      ++g_dropped;
      return;
    }
    g_recs = r;
    g_cap = cap;
  }
  g_recs[g_num++] = (kt_rec_t){start, end, kind, name};
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size,
                                      size_t *max_records) {
  *buffer = aligned_alloc(8, KT_BUFFER_BYTES);
  *size = *buffer ? KT_BUFFER_BYTES : 0;
  *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream,
                                      uint8_t *buffer, size_t size,
                                      size_t valid) {
  (void)ctx;
  (void)stream;
  (void)size;
  CUpti_Activity *rec = NULL;
  pthread_mutex_lock(&g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    switch (rec->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        push(k->start, k->end, 0, intern(k->name));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
        push(m->start, m->end, 1, 0);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
        push(m->start, m->end, 2, 0);
        break;
      }
      default:
        break;
    }
  }
  size_t dropped = 0;
  cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
  g_dropped += dropped;
  pthread_mutex_unlock(&g_mu);
  free(buffer);
}

static const CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET};

// 0 on success, else the failing CUptiResult.
int kt_start(void) {
  CUptiResult r =
      cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) return (int)r;
  for (size_t i = 0; i < sizeof(kKinds) / sizeof(kKinds[0]); ++i) {
    r = cuptiActivityEnable(kKinds[i]);
    if (r != CUPTI_SUCCESS) return (int)r;
  }
  return 0;
}

uint64_t kt_now(void) {
  uint64_t t = 0;
  cuptiGetTimestamp(&t);
  return t;
}

// Flushes every buffer and stops collecting.
int kt_stop(void) {
  CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  for (size_t i = 0; i < sizeof(kKinds) / sizeof(kKinds[0]); ++i)
    cuptiActivityDisable(kKinds[i]);
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  return (int)r;
}

uint64_t kt_count(void) { return g_num; }
uint64_t kt_dropped(void) { return g_dropped; }

// Copies record i's fields out; returns 0, or -1 past the end.
int kt_get(uint64_t i, uint64_t *start, uint64_t *end, uint32_t *kind,
           uint32_t *name) {
  if (i >= g_num) return -1;
  *start = g_recs[i].start;
  *end = g_recs[i].end;
  *kind = g_recs[i].kind;
  *name = g_recs[i].name;
  return 0;
}

const char *kt_name(uint32_t i) { return i < g_num_names ? g_names[i] : "?"; }

void kt_clear(void) {
  pthread_mutex_lock(&g_mu);
  g_num = 0;
  g_dropped = 0;
  pthread_mutex_unlock(&g_mu);
}
