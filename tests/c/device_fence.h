// Waits until every job queued on a device so far is over, cleanup
// included. A run's `done` event completes before its job drops its last
// references (the executable, on the device's worker), so memory counts
// read right after an event lag by a few microseconds (seen under ASan). A
// job enqueued behind the others runs after all of them.
#ifndef IRON_TESTS_DEVICE_FENCE_H_
#define IRON_TESTS_DEVICE_FENCE_H_

#include <pthread.h>
#include <stdbool.h>

#include "device/device.h"

typedef struct {
  iron_job_t job;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  bool done;
} test_fence_job_t;

static void test_fence_run(iron_job_t *job) {
  test_fence_job_t *f = (test_fence_job_t *)job;
  pthread_mutex_lock(&f->mu);
  f->done = true;
  pthread_cond_signal(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

// The device's bytes in use once its queue is drained.
static inline int64_t test_settled_bytes(iron_device_t *dev) {
  test_fence_job_t f = {.job = {.run = test_fence_run},
                        .mu = PTHREAD_MUTEX_INITIALIZER,
                        .cv = PTHREAD_COND_INITIALIZER};
  iron_device_enqueue(dev, &f.job, false);
  pthread_mutex_lock(&f.mu);
  while (!f.done) pthread_cond_wait(&f.cv, &f.mu);
  pthread_mutex_unlock(&f.mu);
  return iron_device_bytes_in_use(dev);
}

#endif  // IRON_TESTS_DEVICE_FENCE_H_
