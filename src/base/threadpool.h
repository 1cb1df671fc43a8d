// A fixed pool of worker threads for data-parallel kernels. The caller of
// iron_threadpool_parallel_for takes part in the work and returns when every
// chunk is done. Calls from several threads at once are serialized (one
// parallel region at a time per pool); a nested call from inside a chunk runs
// inline on the calling thread. Chunks run in the calling thread's
// floating-point environment (base/fpenv.h).
#ifndef IRON_BASE_THREADPOOL_H_
#define IRON_BASE_THREADPOOL_H_

#include <stdint.h>

#include "base/status.h"

typedef struct iron_threadpool iron_threadpool_t;

// fn processes indices [begin, end).
typedef void (*iron_parallel_fn_t)(void *arg, int64_t begin, int64_t end);

// num_threads <= 0 picks IRON_NUM_THREADS or the number of online CPUs.
iron_status_t iron_threadpool_create(int num_threads,
                                     iron_threadpool_t **out_pool);
void iron_threadpool_destroy(iron_threadpool_t *pool);
int iron_threadpool_size(const iron_threadpool_t *pool);

// Splits [0, n) into chunks of at least `grain` indices. Runs inline when the
// pool is NULL, has one thread, or n <= grain.
void iron_threadpool_parallel_for(iron_threadpool_t *pool, int64_t n,
                                  int64_t grain, iron_parallel_fn_t fn,
                                  void *arg);

#endif  // IRON_BASE_THREADPOOL_H_
