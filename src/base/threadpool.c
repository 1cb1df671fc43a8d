#include "base/threadpool.h"

#include "base/fpenv.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

struct iron_threadpool {
  int num_threads;  // including the caller
  pthread_t *threads;
  pthread_mutex_t mu;
  pthread_cond_t work_cv;
  pthread_cond_t done_cv;
  pthread_mutex_t region_mu;  // one parallel region at a time
  bool shutdown;
  // The current job.
  uint64_t generation;
  iron_parallel_fn_t fn;
  void *arg;
  uint64_t fpenv;  // the starting thread's FP environment (base/fpenv.h)
  int64_t n, chunk;
  int64_t next;      // next chunk start (guarded by mu)
  int active;        // workers still inside the job
};

static _Thread_local bool tls_in_pool_chunk = false;

static bool take_chunk(iron_threadpool_t *p, int64_t *b, int64_t *e) {
  if (p->next >= p->n) return false;
  *b = p->next;
  *e = *b + p->chunk < p->n ? *b + p->chunk : p->n;
  p->next = *e;
  return true;
}

static void *worker_main(void *arg) {
  iron_threadpool_t *p = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->shutdown && p->generation == seen)
      pthread_cond_wait(&p->work_cv, &p->mu);
    if (p->shutdown) break;
    seen = p->generation;
    p->active++;
    int64_t b, e;
    // Chunks compute as the starting thread would (denormals flushed or
    // not): a parallel region is a split loop.
    if (iron_fpenv_get() != p->fpenv) iron_fpenv_set(p->fpenv);
    while (take_chunk(p, &b, &e)) {
      pthread_mutex_unlock(&p->mu);
      tls_in_pool_chunk = true;
      p->fn(p->arg, b, e);
      tls_in_pool_chunk = false;
      pthread_mutex_lock(&p->mu);
    }
    if (--p->active == 0) pthread_cond_broadcast(&p->done_cv);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

iron_status_t iron_threadpool_create(int num_threads,
                                     iron_threadpool_t **out_pool) {
  *out_pool = NULL;
  if (num_threads <= 0) {
    const char *env = getenv("IRON_NUM_THREADS");
    if (env && atoi(env) > 0) num_threads = atoi(env);
  }
  if (num_threads <= 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    num_threads = c > 0 ? (int)c : 1;
  }
  if (num_threads > 256) num_threads = 256;
  iron_threadpool_t *p = calloc(1, sizeof(*p));
  if (!p) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for threadpool");
  p->num_threads = num_threads;
  pthread_mutex_init(&p->mu, NULL);
  pthread_mutex_init(&p->region_mu, NULL);
  pthread_cond_init(&p->work_cv, NULL);
  pthread_cond_init(&p->done_cv, NULL);
  if (num_threads > 1) {
    p->threads = calloc((size_t)num_threads - 1, sizeof(pthread_t));
    if (!p->threads) {
      iron_threadpool_destroy(p);
      return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for threadpool");
    }
    for (int i = 0; i < num_threads - 1; ++i) {
      if (pthread_create(&p->threads[i], NULL, worker_main, p) != 0) {
        p->num_threads = i + 1;
        break;
      }
    }
  }
  *out_pool = p;
  return IRON_OK;
}

void iron_threadpool_destroy(iron_threadpool_t *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->shutdown = true;
  pthread_cond_broadcast(&p->work_cv);
  pthread_mutex_unlock(&p->mu);
  if (p->threads) {
    for (int i = 0; i < p->num_threads - 1; ++i)
      pthread_join(p->threads[i], NULL);
    free(p->threads);
  }
  pthread_mutex_destroy(&p->mu);
  pthread_mutex_destroy(&p->region_mu);
  pthread_cond_destroy(&p->work_cv);
  pthread_cond_destroy(&p->done_cv);
  free(p);
}

int iron_threadpool_size(const iron_threadpool_t *p) {
  return p ? p->num_threads : 1;
}

void iron_threadpool_parallel_for(iron_threadpool_t *p, int64_t n,
                                  int64_t grain, iron_parallel_fn_t fn,
                                  void *arg) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  if (!p || p->num_threads <= 1 || n <= grain || tls_in_pool_chunk) {
    fn(arg, 0, n);
    return;
  }
  int64_t chunks = (n + grain - 1) / grain;
  int64_t want = (int64_t)p->num_threads * 4;
  if (chunks > want) chunks = want;
  int64_t chunk = (n + chunks - 1) / chunks;

  pthread_mutex_lock(&p->region_mu);
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->arg = arg;
  p->fpenv = iron_fpenv_get();
  p->n = n;
  p->chunk = chunk;
  p->next = 0;
  p->generation++;
  pthread_cond_broadcast(&p->work_cv);
  int64_t b, e;
  while (take_chunk(p, &b, &e)) {
    pthread_mutex_unlock(&p->mu);
    tls_in_pool_chunk = true;
    fn(arg, b, e);
    tls_in_pool_chunk = false;
    pthread_mutex_lock(&p->mu);
  }
  while (p->active > 0) pthread_cond_wait(&p->done_cv, &p->mu);
  pthread_mutex_unlock(&p->mu);
  pthread_mutex_unlock(&p->region_mu);
}
