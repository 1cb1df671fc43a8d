// Buffers: immutable shaped arrays. The contents live in ref-counted storage
// that appears when the producing work completes (before the ready event).
#include <stdlib.h>
#include <string.h>

#include "runtime/runtime_internal.h"

static iron_status_t check_shape(iron_dtype_t dtype, int32_t rank,
                                 const int64_t *dims, int64_t *out_count,
                                 size_t *out_nbytes) {
  if ((int)dtype <= IRON_DTYPE_INVALID || (int)dtype >= IRON_DTYPE_COUNT)
    return IRON_ERR(INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
  if (rank < 0 || rank > IRON_MAX_RANK)
    return IRON_ERR(INVALID_ARGUMENT, "rank %d out of range [0, %d]",
                    (int)rank, IRON_MAX_RANK);
  int64_t n = 1;
  for (int32_t i = 0; i < rank; ++i) {
    if (dims[i] < 0)
      return IRON_ERR(INVALID_ARGUMENT, "dimension %d is negative (%lld)",
                      (int)i, (long long)dims[i]);
    if (iron_mul_overflow_i64(n, dims[i], &n))
      return IRON_ERR(INVALID_ARGUMENT, "element count overflows");
  }
  size_t bytes;
  if (iron_mul_overflow_size((size_t)n, iron_dtype_size(dtype), &bytes))
    return IRON_ERR(INVALID_ARGUMENT, "byte size overflows");
  *out_count = n;
  *out_nbytes = bytes;
  return IRON_OK;
}

iron_status_t iron_buffer_create_pending(iron_device_t *dev,
                                         iron_dtype_t dtype, int32_t rank,
                                         const int64_t *dims,
                                         iron_event_t *ready,
                                         iron_buffer_t **out_buffer) {
  int64_t count;
  size_t nbytes;
  IRON_RETURN_IF_ERROR_PLAIN(check_shape(dtype, rank, dims, &count, &nbytes));
  iron_buffer_t *b = malloc(sizeof(*b));
  if (!b) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for a buffer");
  atomic_init(&b->ref, 1);
  b->dev = dev;
  b->dtype = dtype;
  b->rank = rank;
  if (rank) memcpy(b->dims, dims, sizeof(int64_t) * (size_t)rank);
  b->count = count;
  b->nbytes = nbytes;
  iron_event_retain(ready);
  b->ready = ready;
  pthread_mutex_init(&b->mu, NULL);
  b->storage = NULL;
  b->donated = false;
  b->space = IRON_MEMORY_DEVICE;
  iron_runtime_retain_internal(dev->runtime);
  *out_buffer = b;
  return IRON_OK;
}

void iron_buffer_set_storage(iron_buffer_t *buf, iron_storage_t *storage) {
  pthread_mutex_lock(&buf->mu);
  iron_storage_t *old = buf->storage;
  buf->storage = storage;
  pthread_mutex_unlock(&buf->mu);
  iron_storage_release(old);
}

iron_status_t iron_buffer_acquire_storage(iron_buffer_t *buf, bool take,
                                          iron_storage_t **out_storage,
                                          bool *out_taken) {
  if (out_taken) *out_taken = false;
  if (!iron_event_is_ready(buf->ready)) {
    iron_status_t st = iron_event_wait(buf->ready);
    if (st) return st;
  } else if (buf->ready->status) {
    return iron_status_clone(buf->ready->status);
  }
  pthread_mutex_lock(&buf->mu);
  iron_storage_t *s = buf->storage;
  if (!s) {
    bool donated = buf->donated;
    pthread_mutex_unlock(&buf->mu);
    if (donated)
      return IRON_ERR(FAILED_PRECONDITION,
                      "buffer was donated to an execution and can no longer "
                      "be used");
    // 0-byte buffers always have storage; this is a bug guard.
    return IRON_ERR(INTERNAL, "buffer has no storage");
  }
  if (take && iron_storage_refcount(s) == 1) {
    buf->storage = NULL;
    buf->donated = true;
    if (out_taken) *out_taken = true;
  } else {
    iron_storage_retain(s);
  }
  pthread_mutex_unlock(&buf->mu);
  *out_storage = s;
  return IRON_OK;
}

// Copies an array with arbitrary byte strides (negative and zero included)
// into dense row-major `dst`.
static void strided_copy(void *dst, const void *src, int32_t rank,
                         const int64_t *dims, const int64_t *strides,
                         size_t esize, int64_t count) {
  if (count == 0) return;
  // Collapse: the innermost dims that are contiguous copy as one run.
  int32_t inner = rank;
  size_t run = esize;
  while (inner > 0 && strides[inner - 1] == (int64_t)run) {
    run *= (size_t)dims[inner - 1];
    inner--;
  }
  if (inner == 0) {
    memcpy(dst, src, run);
    return;
  }
  int64_t idx[IRON_MAX_RANK] = {0};
  const char *p = (const char *)src;
  char *d = (char *)dst;
  int64_t runs = count / (int64_t)(run / esize);
  for (int64_t r = 0; r < runs; ++r) {
    if (run == esize) {
      switch (esize) {
        case 1: *d = *p; break;
        case 2: memcpy(d, p, 2); break;
        case 4: memcpy(d, p, 4); break;
        case 8: memcpy(d, p, 8); break;
        default: memcpy(d, p, esize); break;
      }
    } else {
      memcpy(d, p, run);
    }
    d += run;
    // Advance the multi-index over dims [0, inner).
    for (int32_t i = inner - 1; i >= 0; --i) {
      p += strides[i];
      if (++idx[i] < dims[i]) break;
      p -= strides[i] * dims[i];
      idx[i] = 0;
    }
  }
}

iron_status_t iron_buffer_create_from_host(iron_device_t *dev,
                                           iron_dtype_t dtype, int32_t rank,
                                           const int64_t *dims,
                                           const void *data,
                                           const int64_t *byte_strides,
                                           iron_buffer_t **out_buffer) {
  return iron_buffer_create_from_host_in(dev, IRON_MEMORY_DEVICE, dtype, rank,
                                         dims, data, byte_strides, out_buffer);
}

iron_status_t iron_buffer_create_from_host_in(
    iron_device_t *dev, iron_memory_space_t space, iron_dtype_t dtype,
    int32_t rank, const int64_t *dims, const void *data,
    const int64_t *byte_strides, iron_buffer_t **out_buffer) {
  if (!dev) return IRON_ERR(INVALID_ARGUMENT, "no device");
  if (space != IRON_MEMORY_DEVICE && space != IRON_MEMORY_HOST)
    return IRON_ERR(INVALID_ARGUMENT, "invalid memory space %d", (int)space);
  int64_t count;
  size_t nbytes;
  IRON_RETURN_IF_ERROR_PLAIN(check_shape(dtype, rank, dims, &count, &nbytes));
  if (!data && nbytes > 0)
    return IRON_ERR(INVALID_ARGUMENT, "NULL data for a %zu-byte buffer",
                    nbytes);
  iron_storage_t *s;
  IRON_RETURN_IF_ERROR_PLAIN(iron_storage_allocate_in(dev, space, nbytes, &s));
  size_t esize = iron_dtype_size(dtype);
  bool dense = !byte_strides || esize == 0;
  if (dev->vtable->memcpy && !s->host_memory && nbytes) {
    // Device memory: strided data is made dense on the host first.
    void *tmp = NULL;
    if (!dense) {
      tmp = malloc(nbytes);
      if (!tmp) {
        iron_storage_release(s);
        return IRON_ERR(RESOURCE_EXHAUSTED,
                        "out of memory for a %zu-byte staging copy", nbytes);
      }
      strided_copy(tmp, data, rank, dims, byte_strides, esize, count);
    }
    iron_status_t st = dev->vtable->memcpy(dev, s->data, dense ? data : tmp,
                                           nbytes, IRON_COPY_HOST_TO_DEVICE);
    free(tmp);
    if (st) {
      iron_storage_release(s);
      return st;
    }
  } else if (dense) {
    if (nbytes) memcpy(s->data, data, nbytes);
  } else {
    strided_copy(s->data, data, rank, dims, byte_strides, esize, count);
  }
  iron_event_t *ev = iron_event_new();
  if (!ev) {
    iron_storage_release(s);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for an event");
  }
  iron_buffer_t *b;
  iron_status_t st = iron_buffer_create_pending(dev, dtype, rank, dims, ev, &b);
  if (st) {
    iron_event_release(ev);
    iron_storage_release(s);
    return st;
  }
  b->storage = s;
  b->space = space;
  iron_event_complete(ev, IRON_OK);
  iron_event_release(ev);
  *out_buffer = b;
  return IRON_OK;
}

void iron_buffer_retain(iron_buffer_t *buf) {
  if (buf) atomic_fetch_add_explicit(&buf->ref, 1, memory_order_relaxed);
}

void iron_buffer_release(iron_buffer_t *buf) {
  if (!buf) return;
  if (atomic_fetch_sub_explicit(&buf->ref, 1, memory_order_acq_rel) != 1)
    return;
  iron_runtime_t *rt = buf->dev->runtime;
  iron_storage_release(buf->storage);
  iron_event_release(buf->ready);
  pthread_mutex_destroy(&buf->mu);
  free(buf);
  iron_runtime_release(rt);
}

iron_device_t *iron_buffer_device(const iron_buffer_t *buf) { return buf->dev; }
iron_dtype_t iron_buffer_dtype(const iron_buffer_t *buf) { return buf->dtype; }
int32_t iron_buffer_rank(const iron_buffer_t *buf) { return buf->rank; }
const int64_t *iron_buffer_dims(const iron_buffer_t *buf) { return buf->dims; }
size_t iron_buffer_size_in_bytes(const iron_buffer_t *buf) {
  return buf->nbytes;
}
iron_memory_space_t iron_buffer_memory_space(const iron_buffer_t *buf) {
  return buf->space;
}

iron_event_t *iron_buffer_ready_event(iron_buffer_t *buf) {
  iron_event_retain(buf->ready);
  return buf->ready;
}

void *iron_buffer_host_pointer(iron_buffer_t *buf) {
  if (buf->dev->vtable->mem_alloc) return NULL;  // device memory
  if (!iron_event_is_ready(buf->ready) || buf->ready->status) return NULL;
  pthread_mutex_lock(&buf->mu);
  void *p = buf->storage ? buf->storage->data : NULL;
  pthread_mutex_unlock(&buf->mu);
  return p;
}

void *iron_buffer_device_pointer(iron_buffer_t *buf) {
  if (!iron_event_is_ready(buf->ready) || buf->ready->status) return NULL;
  pthread_mutex_lock(&buf->mu);
  void *p = buf->storage && !buf->donated ? buf->storage->data : NULL;
  pthread_mutex_unlock(&buf->mu);
  return p;
}

iron_status_t iron_storage_copy(void *dst, iron_device_t *dst_dev,
                                const void *src, iron_device_t *src_dev,
                                size_t n) {
  if (n == 0) return IRON_OK;
  bool dst_mem = dst_dev && dst_dev->vtable->memcpy;
  bool src_mem = src_dev && src_dev->vtable->memcpy;
  if (!dst_mem && !src_mem) {
    memcpy(dst, src, n);
    return IRON_OK;
  }
  if (dst_mem && src_mem && dst_dev == src_dev)
    return dst_dev->vtable->memcpy(dst_dev, dst, src, n,
                                   IRON_COPY_DEVICE_TO_DEVICE);
  if (!dst_mem)
    return src_dev->vtable->memcpy(src_dev, dst, src, n,
                                   IRON_COPY_DEVICE_TO_HOST);
  if (!src_mem)
    return dst_dev->vtable->memcpy(dst_dev, dst, src, n,
                                   IRON_COPY_HOST_TO_DEVICE);
  // Between two devices with their own memory: through the host (simple and
  // always available; peer copies can come later if they matter).
  void *tmp = malloc(n);
  if (!tmp)
    return IRON_ERR(RESOURCE_EXHAUSTED,
                    "out of memory for a %zu-byte staging copy", n);
  iron_status_t st =
      src_dev->vtable->memcpy(src_dev, tmp, src, n, IRON_COPY_DEVICE_TO_HOST);
  if (!st)
    st = dst_dev->vtable->memcpy(dst_dev, dst, tmp, n,
                                 IRON_COPY_HOST_TO_DEVICE);
  free(tmp);
  return st;
}

// --- to_host -------------------------------------------------------------

typedef struct {
  iron_buffer_t *buf;
  void *dst;
  iron_event_t *done;
} to_host_t;

static void to_host_copy(iron_status_t status, void *arg) {
  to_host_t *t = arg;
  if (!status) {
    iron_storage_t *s;
    status = iron_buffer_acquire_storage(t->buf, false, &s, NULL);
    if (!status) {
      status = iron_storage_copy(t->dst, NULL, s->data,
                                 iron_storage_copy_device(s, t->buf->dev),
                                 t->buf->nbytes);
      iron_storage_release(s);
    }
  }
  iron_buffer_release(t->buf);
  iron_event_complete(t->done, status);
  iron_event_release(t->done);
  free(t);
}

iron_status_t iron_buffer_to_host(iron_buffer_t *buf, void *dst,
                                  size_t dst_size, iron_event_t **out_done) {
  if (dst_size != buf->nbytes)
    return IRON_ERR(INVALID_ARGUMENT,
                    "to_host: destination has %zu bytes, buffer has %zu",
                    dst_size, buf->nbytes);
  if (!dst && dst_size)
    return IRON_ERR(INVALID_ARGUMENT, "to_host: NULL destination");
  iron_event_t *done = iron_event_new();
  to_host_t *t = malloc(sizeof(*t));
  if (!done || !t) {
    free(t);
    iron_event_release(done);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory in to_host");
  }
  iron_buffer_retain(buf);
  iron_event_retain(done);
  t->buf = buf;
  t->dst = dst;
  t->done = done;
  // Runs now when ready, else on the thread that completes the buffer.
  iron_event_on_ready(buf->ready, to_host_copy, t);
  if (out_done)
    *out_done = done;
  else
    iron_event_release(done);
  return IRON_OK;
}

// --- copy_to_device ------------------------------------------------------

typedef struct {
  iron_buffer_t *src, *dst;
  iron_event_t *ready;
} copy_t;

static void copy_finish(iron_status_t status, void *arg) {
  copy_t *c = arg;
  iron_storage_t *s = NULL;
  if (!status)
    status = iron_buffer_acquire_storage(c->src, false, &s, NULL);
  bool host_memory = c->dst->space == IRON_MEMORY_HOST &&
                     iron_device_has_host_memory(c->dst->dev);
  if (!status && (c->dst->dev != c->src->dev || s->host_memory != host_memory)) {
    // Another device or memory: its own bytes (and accounting).
    iron_storage_t *d;
    status = iron_storage_allocate_in(c->dst->dev, c->dst->space,
                                      c->src->nbytes, &d);
    if (!status) {
      status = iron_storage_copy(
          d->data, iron_storage_copy_device(d, c->dst->dev), s->data,
          iron_storage_copy_device(s, c->src->dev), c->src->nbytes);
      if (status) iron_storage_release(d);
    }
    iron_storage_release(s);
    s = status ? NULL : d;
  }
  // The same memory: buffers are immutable, so the copy shares the storage.
  if (!status) iron_buffer_set_storage(c->dst, s);
  iron_event_complete(c->ready, status);
  iron_event_release(c->ready);
  iron_buffer_release(c->src);
  iron_buffer_release(c->dst);
  free(c);
}

iron_status_t iron_buffer_copy_to_device(iron_buffer_t *buf,
                                         iron_device_t *dst_dev,
                                         iron_buffer_t **out_buffer) {
  return iron_buffer_copy_to_memory(buf, dst_dev, IRON_MEMORY_DEVICE,
                                    out_buffer);
}

iron_status_t iron_buffer_copy_to_memory(iron_buffer_t *buf,
                                         iron_device_t *dst_dev,
                                         iron_memory_space_t space,
                                         iron_buffer_t **out_buffer) {
  if (!dst_dev) return IRON_ERR(INVALID_ARGUMENT, "no destination device");
  if (space != IRON_MEMORY_DEVICE && space != IRON_MEMORY_HOST)
    return IRON_ERR(INVALID_ARGUMENT, "invalid memory space %d", (int)space);
  iron_event_t *ev = iron_event_new();
  copy_t *c = malloc(sizeof(*c));
  if (!ev || !c) {
    free(c);
    iron_event_release(ev);
    return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory in copy_to_device");
  }
  iron_buffer_t *dst;
  iron_status_t st = iron_buffer_create_pending(dst_dev, buf->dtype, buf->rank,
                                                buf->dims, ev, &dst);
  if (st) {
    free(c);
    iron_event_release(ev);
    return st;
  }
  dst->space = space;
  iron_buffer_retain(buf);
  iron_buffer_retain(dst);
  c->src = buf;
  c->dst = dst;
  c->ready = ev;  // our reference moves into c
  iron_event_on_ready(buf->ready, copy_finish, c);
  *out_buffer = dst;
  return IRON_OK;
}
