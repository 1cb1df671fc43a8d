#include "device/host/shape_copy.h"

#include <stdbool.h>
#include <stdlib.h>
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

// Transposing copies: the innermost dim (a) is strided in the source and
// another dim (b) is contiguous there. Copying 16x16 tiles of (b, a) keeps
// the source lines in cache while the destination is written contiguously.
#define IRON_TILE 16

typedef struct tile_job {
  const iron_host_copy_plan_t *plan;
  const char *src;
  char *dst;
  int32_t a, b;
  int64_t btiles;
} tile_job_t;

#define IRON_TILE_COPY_(SZ)                                                \
  for (int64_t i = i0; i < i1; ++i)                                        \
    for (int64_t j = 0; j < na; ++j)                                       \
      memcpy(d + (i * dsb + j * dsa) * (SZ), s + (i * ssb + j * ssa) * (SZ), \
             SZ);

static void copy_tiles(void *arg, int64_t begin, int64_t end) {
  const tile_job_t *job = arg;
  const iron_host_copy_plan_t *p = job->plan;
  int64_t es = (int64_t)p->elem_size;
  int64_t ssa = p->src_strides[job->a], dsa = p->dst_strides[job->a];
  int64_t ssb = p->src_strides[job->b], dsb = p->dst_strides[job->b];
  int64_t da = p->dims[job->a], db = p->dims[job->b];
  for (int64_t t = begin; t < end; ++t) {
    int64_t tb = t % job->btiles, rem = t / job->btiles;
    int64_t so = 0, doff = 0;
    for (int32_t d = p->rank - 1; d >= 0; --d) {
      if (d == job->a || d == job->b) continue;
      int64_t idx = rem % p->dims[d];
      rem /= p->dims[d];
      so += idx * p->src_strides[d];
      doff += idx * p->dst_strides[d];
    }
    int64_t i0 = tb * IRON_TILE;
    int64_t i1 = db - i0 < IRON_TILE ? db : i0 + IRON_TILE;
    for (int64_t j0 = 0; j0 < da; j0 += IRON_TILE) {
      int64_t na = da - j0 < IRON_TILE ? da - j0 : IRON_TILE;
      const char *s = job->src + (so + j0 * ssa) * es;
      char *d = job->dst + (doff + j0 * dsa) * es;
      switch (es) {
        case 1: IRON_TILE_COPY_(1) break;
        case 2: IRON_TILE_COPY_(2) break;
        case 4: IRON_TILE_COPY_(4) break;
        case 8: IRON_TILE_COPY_(8) break;
        case 16: IRON_TILE_COPY_(16) break;
        default:
          for (int64_t i = i0; i < i1; ++i)
            for (int64_t j = 0; j < na; ++j)
              memcpy(d + (i * dsb + j * dsa) * es, s + (i * ssb + j * ssa) * es,
                     (size_t)es);
      }
    }
  }
}

static bool tiles_enabled(void) {
  static int cached = -1;  // benign race: every thread computes the same
  if (cached < 0) {
    const char *e = getenv("IRON_HOST_TRANSPOSE_TILES");
    cached = !(e && e[0] == '0');
  }
  return cached == 1;
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
  int32_t last = p->rank - 1;
  int64_t n = p->dims[last];
  if (p->rank >= 2 && p->src_strides[last] != 1 && n >= 8 &&
      p->count >= 4096 && tiles_enabled()) {
    int32_t b = -1;
    for (int32_t i = 0; i < last; ++i)
      if (p->src_strides[i] == 1 && p->dims[i] >= 8) b = i;
    if (b >= 0) {
      tile_job_t job = {p, s, d, last, b,
                        (p->dims[b] + IRON_TILE - 1) / IRON_TILE};
      int64_t tasks = p->count / (p->dims[b] * n) * job.btiles;
      int64_t per_task = IRON_TILE * n * es;
      int64_t grain = per_task >= (256 << 10) ? 1 : (256 << 10) / per_task;
      iron_threadpool_parallel_for(pool, tasks, grain, copy_tiles, &job);
      return;
    }
  }
  copy_job_t job = {p, s, d};
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
