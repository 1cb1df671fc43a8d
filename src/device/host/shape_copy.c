#include "device/host/shape_copy.h"

#include <string.h>

void iron_host_row_major_strides(int32_t rank, const int64_t *dims,
                                 int64_t *out_strides) {
  int64_t s = 1;
  for (int32_t i = rank - 1; i >= 0; --i) {
    out_strides[i] = s;
    s *= dims[i];
  }
}

void iron_host_copy_plan_finalize(iron_host_copy_plan_t *p) {
  int64_t count = 1;
  for (int32_t i = 0; i < p->rank; ++i) count *= p->dims[i];
  p->count = count;
  if (count == 0) {
    p->rank = 0;
    return;
  }
  // Drop unit dims.
  int32_t r = 0;
  for (int32_t i = 0; i < p->rank; ++i) {
    if (p->dims[i] == 1) continue;
    p->dims[r] = p->dims[i];
    p->src_strides[r] = p->src_strides[i];
    p->dst_strides[r] = p->dst_strides[i];
    r++;
  }
  // Merge dim i into i+1 when both sides step through it contiguously.
  int32_t m = 0;
  for (int32_t i = 0; i < r; ++i) {
    if (m > 0 &&
        p->src_strides[m - 1] == p->src_strides[i] * p->dims[i] &&
        p->dst_strides[m - 1] == p->dst_strides[i] * p->dims[i]) {
      p->dims[m - 1] *= p->dims[i];
      p->src_strides[m - 1] = p->src_strides[i];
      p->dst_strides[m - 1] = p->dst_strides[i];
      continue;
    }
    p->dims[m] = p->dims[i];
    p->src_strides[m] = p->src_strides[i];
    p->dst_strides[m] = p->dst_strides[i];
    m++;
  }
  p->rank = m;
}

// One innermost row: n elements with element strides ss / ds.
static void copy_row(const char *src, char *dst, int64_t n, int64_t ss,
                     int64_t ds, size_t es) {
  if (ss == 1 && ds == 1) {
    memcpy(dst, src, (size_t)n * es);
    return;
  }
  // Fixed-size memcpy compiles to plain loads and stores.
#define IRON_COPY_ROW_(SZ)                                          \
  for (int64_t i = 0; i < n; ++i)                                   \
    memcpy(dst + i * ds * (SZ), src + i * ss * (SZ), SZ);           \
  return;
  switch (es) {
    case 1: IRON_COPY_ROW_(1)
    case 2: IRON_COPY_ROW_(2)
    case 4: IRON_COPY_ROW_(4)
    case 8: IRON_COPY_ROW_(8)
    case 16: IRON_COPY_ROW_(16)
    default:
      for (int64_t i = 0; i < n; ++i)
        memcpy(dst + i * ds * (int64_t)es, src + i * ss * (int64_t)es, es);
  }
#undef IRON_COPY_ROW_
}

typedef struct copy_job {
  const iron_host_copy_plan_t *plan;
  const char *src;  // already offset
  char *dst;
} copy_job_t;

// Rows [begin, end) of the iteration space without its last dim.
static void copy_rows(void *arg, int64_t begin, int64_t end) {
  const copy_job_t *job = arg;
  const iron_host_copy_plan_t *p = job->plan;
  int32_t outer = p->rank - 1;
  int64_t n = p->dims[outer];
  int64_t ss = p->src_strides[outer], ds = p->dst_strides[outer];
  int64_t es = (int64_t)p->elem_size;
  int64_t idx[IRON_MAX_RANK];
  int64_t so = 0, doff = 0, rem = begin;
  for (int32_t d = outer - 1; d >= 0; --d) {
    idx[d] = rem % p->dims[d];
    rem /= p->dims[d];
    so += idx[d] * p->src_strides[d];
    doff += idx[d] * p->dst_strides[d];
  }
  for (int64_t row = begin; row < end; ++row) {
    copy_row(job->src + so * es, job->dst + doff * es, n, ss, ds,
             p->elem_size);
    for (int32_t d = outer - 1; d >= 0; --d) {
      so += p->src_strides[d];
      doff += p->dst_strides[d];
      if (++idx[d] < p->dims[d]) break;
      so -= p->src_strides[d] * p->dims[d];
      doff -= p->dst_strides[d] * p->dims[d];
      idx[d] = 0;
    }
  }
}

void iron_host_copy_run(iron_threadpool_t *pool,
                        const iron_host_copy_plan_t *p, const void *src,
                        void *dst, int64_t src_extra, int64_t dst_extra) {
  if (p->count == 0 || p->elem_size == 0) return;
  int64_t es = (int64_t)p->elem_size;
  const char *s = (const char *)src + (p->src_offset + src_extra) * es;
  char *d = (char *)dst + (p->dst_offset + dst_extra) * es;
  if (p->rank == 0) {
    memcpy(d, s, p->elem_size);
    return;
  }
  copy_job_t job = {p, s, d};
  int64_t n = p->dims[p->rank - 1];
  int64_t rows = p->count / n;
  // Chunks of about 256 KiB keep the thread hand-off cost negligible.
  int64_t row_bytes = n * es;
  int64_t grain = row_bytes >= (256 << 10) ? 1 : (256 << 10) / row_bytes;
  iron_threadpool_parallel_for(pool, rows, grain, copy_rows, &job);
}

typedef struct fill_job {
  char *dst;
  const void *value;
  size_t es;
} fill_job_t;

static void fill_range(void *arg, int64_t begin, int64_t end) {
  const fill_job_t *j = arg;
  size_t es = j->es;
  char *d = j->dst + (size_t)begin * es;
  int64_t n = end - begin;
  if (n <= 0) return;
  // Write one element, then double the filled prefix with memcpy.
  memcpy(d, j->value, es);
  int64_t done = 1;
  while (done < n) {
    int64_t k = done < n - done ? done : n - done;
    memcpy(d + (size_t)done * es, d, (size_t)k * es);
    done += k;
  }
}

void iron_host_fill(iron_threadpool_t *pool, void *dst, int64_t count,
                    const void *value, size_t elem_size) {
  if (count <= 0 || elem_size == 0) return;
  fill_job_t job = {dst, value, elem_size};
  int64_t grain = (int64_t)((1 << 20) / elem_size);
  iron_threadpool_parallel_for(pool, count, grain, fill_range, &job);
}
