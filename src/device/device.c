#include "device/device.h"

#include "base/fpenv.h"

#include <stdlib.h>
#include <string.h>

// Header padded to 64 bytes so that data stays 64-byte aligned.
#define IRON_STORAGE_HEADER 64
_Static_assert(sizeof(iron_storage_t) <= IRON_STORAGE_HEADER,
               "storage header too large");

// Raises dev's peak to `now` (bytes in use right after an allocation).
static void note_peak(iron_device_t *dev, int64_t now) {
  int64_t peak =
      atomic_load_explicit(&dev->peak_bytes_in_use, memory_order_relaxed);
  while (now > peak &&
         !atomic_compare_exchange_weak(&dev->peak_bytes_in_use, &peak, now)) {
  }
}

iron_status_t iron_storage_allocate(iron_device_t *dev, size_t nbytes,
                                    iron_storage_t **out_storage) {
  size_t padded;
  if (nbytes > SIZE_MAX - IRON_STORAGE_HEADER - 63)
    return IRON_ERR(RESOURCE_EXHAUSTED,
                    "out of memory allocating %zu bytes (size overflow)",
                    nbytes);
  padded = (nbytes + 63) & ~(size_t)63;
  size_t total = padded + IRON_STORAGE_HEADER;
  // The bytes are reserved before the allocation (so concurrent allocations
  // cannot pass the limit together), but the peak only counts them once the
  // allocation succeeded: a refused 10^12-element result must not show as
  // a 4 TB peak (issue 13).
  int64_t now = 0;
  if (dev) {
    if (padded > (size_t)INT64_MAX / 2)
      return IRON_ERR(RESOURCE_EXHAUSTED,
                      "out of memory allocating %zu bytes on %s device %d",
                      nbytes, dev->vtable->kind, dev->id);
    int64_t prev = atomic_fetch_add(&dev->bytes_in_use, (int64_t)padded);
    if (dev->memory_limit > 0 && prev + (int64_t)padded > dev->memory_limit) {
      atomic_fetch_sub(&dev->bytes_in_use, (int64_t)padded);
      return IRON_ERR(RESOURCE_EXHAUSTED,
                      "out of memory allocating %zu bytes on %s device %d "
                      "(%lld bytes in use, limit %lld)",
                      nbytes, dev->vtable->kind, dev->id, (long long)prev,
                      (long long)dev->memory_limit);
    }
    now = prev + (int64_t)padded;
  }
  if (dev && dev->vtable->mem_alloc && nbytes > 0) {
    // Device memory: the header lives on the host, the bytes on the device.
    iron_storage_t *s = malloc(sizeof(*s));
    void *ptr = NULL;
    iron_status_t st =
        s ? dev->vtable->mem_alloc(dev, padded, &ptr)
          : IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for a storage header");
    if (st) {
      free(s);
      atomic_fetch_sub(&dev->bytes_in_use, (int64_t)padded);
      return st;
    }
    atomic_init(&s->ref, 1);
    s->dev = dev;
    s->nbytes = nbytes;
    s->accounted = padded;
    s->data = ptr;
    s->pinned = false;
    s->host_memory = false;
    note_peak(dev, now);
    *out_storage = s;
    return IRON_OK;
  }
  iron_storage_t *s = aligned_alloc(64, total);
  if (!s) {
    if (dev) atomic_fetch_sub(&dev->bytes_in_use, (int64_t)padded);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory allocating %zu bytes",
                    nbytes);
  }
  atomic_init(&s->ref, 1);
  s->dev = dev;
  s->nbytes = nbytes;
  s->accounted = dev ? padded : 0;
  s->data = (char *)s + IRON_STORAGE_HEADER;
  s->pinned = false;
  s->host_memory = false;
  if (dev) note_peak(dev, now);
  *out_storage = s;
  return IRON_OK;
}

iron_status_t iron_storage_allocate_in(iron_device_t *dev,
                                       iron_memory_space_t space,
                                       size_t nbytes,
                                       iron_storage_t **out_storage) {
  if (space != IRON_MEMORY_HOST || !dev || !dev->vtable->host_mem_alloc ||
      nbytes == 0)
    return iron_storage_allocate(dev, nbytes, out_storage);
  // Host memory of a device: the device's bytes_in_use (its own memory)
  // does not count it.
  iron_storage_t *s = malloc(sizeof(*s));
  if (!s) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for a storage header");
  void *ptr = NULL;
  iron_status_t st = dev->vtable->host_mem_alloc(dev, nbytes, &ptr);
  if (st) {
    free(s);
    return st;
  }
  atomic_init(&s->ref, 1);
  s->dev = dev;
  s->nbytes = nbytes;
  s->accounted = 0;
  s->data = ptr;
  s->pinned = false;
  s->host_memory = true;
  *out_storage = s;
  return IRON_OK;
}

static void storage_free(iron_storage_t *s);

void iron_storage_release(iron_storage_t *s) {
  if (!s) return;
  if (atomic_fetch_sub_explicit(&s->ref, 1, memory_order_acq_rel) != 1) return;
  if (s->pinned) return;  // the pinner revives or frees it
  storage_free(s);
}

bool iron_storage_unpin(iron_storage_t *s, bool revive) {
  s->pinned = false;
  if (iron_storage_refcount(s) > 0) return true;
  if (revive) {
    atomic_store(&s->ref, 1);
    return true;
  }
  storage_free(s);
  return false;
}

static void storage_free(iron_storage_t *s) {
  if (s->host_memory) {
    s->dev->vtable->host_mem_free(s->dev, s->data);
  } else if (s->dev) {
    // Device memory is the one case where data is not in the header's block.
    if (s->dev->vtable->mem_free && s->data != (char *)s + IRON_STORAGE_HEADER)
      s->dev->vtable->mem_free(s->dev, s->data, s->accounted);
    atomic_fetch_sub(&s->dev->bytes_in_use, (int64_t)s->accounted);
  }
  free(s);
}

static _Thread_local const iron_device_t *tls_worker_dev = NULL;
static _Thread_local int tls_host_callback_depth = 0;

void iron_device_host_callback_enter(void) { ++tls_host_callback_depth; }
void iron_device_host_callback_leave(void) { --tls_host_callback_depth; }

// Runs `job` on this thread (the worker, or inline on the caller).
static void run_job(iron_device_t *dev, iron_job_t *job) {
  if (dev->vtable->thread_enter) dev->vtable->thread_enter(dev);
  if (!dev->flush_denormals) {
    job->run(job);
    return;
  }
  uint64_t fpenv = iron_fpenv_flush_enter();
  job->run(job);
  iron_fpenv_restore(fpenv);
}

static void *worker_main(void *arg) {
  iron_device_t *dev = arg;
  tls_worker_dev = dev;
  pthread_mutex_lock(&dev->mu);
  for (;;) {
    while ((!dev->head || dev->inline_busy) && !dev->shutdown)
      pthread_cond_wait(&dev->cv, &dev->mu);
    while (dev->inline_busy) pthread_cond_wait(&dev->cv, &dev->mu);
    if (!dev->head) break;  // shutdown with an empty queue
    iron_job_t *job = dev->head;
    dev->head = job->next;
    if (!dev->head) dev->tail = NULL;
    dev->worker_busy = true;
    pthread_mutex_unlock(&dev->mu);
    run_job(dev, job);
    pthread_mutex_lock(&dev->mu);
    dev->worker_busy = false;
  }
  bool destroy = dev->destroy_on_exit;
  pthread_mutex_unlock(&dev->mu);
  if (destroy) dev->vtable->destroy(dev);
  return NULL;
}

iron_status_t iron_device_init_base(iron_device_t *dev,
                                    const iron_device_vtable_t *vtable,
                                    iron_runtime_t *rt, int id) {
  dev->vtable = vtable;
  dev->runtime = rt;
  dev->id = id;
  atomic_init(&dev->bytes_in_use, 0);
  atomic_init(&dev->peak_bytes_in_use, 0);
  atomic_init(&dev->recent_count, 0);
  const char *sync = getenv("IRON_SYNC");
  dev->sync = sync && sync[0] && strcmp(sync, "0") != 0;
  const char *limit = getenv("IRON_HOST_MEMORY_LIMIT");
  dev->memory_limit = limit ? atoll(limit) : 0;
  pthread_mutex_init(&dev->mu, NULL);
  pthread_cond_init(&dev->cv, NULL);
  dev->head = dev->tail = NULL;
  dev->shutdown = false;
  dev->has_worker = false;
  dev->destroy_on_exit = false;
  dev->worker_busy = false;
  dev->inline_busy = false;
  dev->flush_denormals = false;
  const char *inl = getenv("IRON_INLINE_SMALL");
  dev->inline_small = !(inl && strcmp(inl, "0") == 0);
  if (!dev->sync) {
    if (pthread_create(&dev->worker, NULL, worker_main, dev) != 0) {
      pthread_mutex_destroy(&dev->mu);
      pthread_cond_destroy(&dev->cv);
      return IRON_ERR(RESOURCE_EXHAUSTED,
                      "cannot start the worker thread of device %d", id);
    }
    dev->has_worker = true;
  }
  return IRON_OK;
}

bool iron_device_deinit_base(iron_device_t *dev) {
  if (dev->has_worker && iron_device_on_worker(dev)) {
    pthread_mutex_lock(&dev->mu);
    dev->shutdown = true;
    dev->destroy_on_exit = true;
    dev->has_worker = false;
    pthread_mutex_unlock(&dev->mu);
    pthread_detach(dev->worker);
    return false;
  }
  if (dev->has_worker) {
    pthread_mutex_lock(&dev->mu);
    dev->shutdown = true;
    pthread_cond_broadcast(&dev->cv);
    pthread_mutex_unlock(&dev->mu);
    pthread_join(dev->worker, NULL);
    dev->has_worker = false;
  }
  pthread_mutex_destroy(&dev->mu);
  pthread_cond_destroy(&dev->cv);
  return true;
}

static void run_inline(iron_device_t *dev, iron_job_t *job) {
  const iron_device_t *prev = tls_worker_dev;
  tls_worker_dev = dev;
  run_job(dev, job);
  tls_worker_dev = prev;
}

void iron_device_enqueue(iron_device_t *dev, iron_job_t *job, bool small) {
  job->next = NULL;
  if (dev->sync || !dev->has_worker ||
      (tls_host_callback_depth > 0 && tls_worker_dev == dev)) {
    run_inline(dev, job);
    return;
  }
  pthread_mutex_lock(&dev->mu);
  // A job enqueued from inside a job (on the worker) must queue.
  if (small && dev->inline_small && !dev->head && !dev->worker_busy &&
      !dev->inline_busy && tls_worker_dev != dev) {
    dev->inline_busy = true;
    pthread_mutex_unlock(&dev->mu);
    run_inline(dev, job);
    pthread_mutex_lock(&dev->mu);
    dev->inline_busy = false;
    if (dev->head) pthread_cond_signal(&dev->cv);
    pthread_mutex_unlock(&dev->mu);
    return;
  }
  if (dev->tail)
    dev->tail->next = job;
  else
    dev->head = job;
  dev->tail = job;
  pthread_cond_signal(&dev->cv);
  pthread_mutex_unlock(&dev->mu);
}

bool iron_device_on_worker(const iron_device_t *dev) {
  return tls_worker_dev == dev;
}
