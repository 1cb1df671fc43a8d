// Events: complete once with a status; waiters block on a condition variable
// and callbacks run on the completing thread (or immediately when already
// complete).
#include <stdlib.h>

#include "runtime/runtime_internal.h"

struct iron_event_callback_node {
  iron_event_callback_t fn;
  void *arg;
  iron_event_callback_node_t *next;
};

iron_event_t *iron_event_new(void) {
  iron_event_t *ev = malloc(sizeof(*ev));
  if (!ev) return NULL;
  atomic_init(&ev->ref, 1);
  pthread_mutex_init(&ev->mu, NULL);
  pthread_cond_init(&ev->cv, NULL);
  atomic_init(&ev->ready, false);
  ev->status = IRON_OK;
  ev->callbacks = NULL;
  return ev;
}

iron_status_t iron_event_create(iron_event_t **out_event) {
  iron_event_t *ev = iron_event_new();
  if (!ev) return IRON_ERR(RESOURCE_EXHAUSTED, "out of memory for an event");
  *out_event = ev;
  return IRON_OK;
}

void iron_event_retain(iron_event_t *ev) {
  if (ev) atomic_fetch_add_explicit(&ev->ref, 1, memory_order_relaxed);
}

void iron_event_release(iron_event_t *ev) {
  if (!ev) return;
  if (atomic_fetch_sub_explicit(&ev->ref, 1, memory_order_acq_rel) != 1)
    return;
  // A never-completed event may still hold callbacks: they are dropped (their
  // owners would wait forever anyway).
  iron_event_callback_node_t *n = ev->callbacks;
  while (n) {
    iron_event_callback_node_t *next = n->next;
    free(n);
    n = next;
  }
  iron_status_free(ev->status);
  pthread_mutex_destroy(&ev->mu);
  pthread_cond_destroy(&ev->cv);
  free(ev);
}

bool iron_event_is_ready(const iron_event_t *ev) {
  return atomic_load_explicit(&((iron_event_t *)ev)->ready,
                              memory_order_acquire);
}

iron_status_t iron_event_wait(iron_event_t *ev) {
  if (!iron_event_is_ready(ev)) {
    pthread_mutex_lock(&ev->mu);
    while (!atomic_load_explicit(&ev->ready, memory_order_relaxed))
      pthread_cond_wait(&ev->cv, &ev->mu);
    pthread_mutex_unlock(&ev->mu);
  }
  return ev->status ? iron_status_clone(ev->status) : IRON_OK;
}

iron_status_t iron_event_status(iron_event_t *ev) {
  if (!iron_event_is_ready(ev)) return IRON_OK;
  return ev->status ? iron_status_clone(ev->status) : IRON_OK;
}

void iron_event_on_ready(iron_event_t *ev, iron_event_callback_t fn,
                         void *arg) {
  if (!iron_event_is_ready(ev)) {
    iron_event_callback_node_t *n = malloc(sizeof(*n));
    pthread_mutex_lock(&ev->mu);
    if (!atomic_load_explicit(&ev->ready, memory_order_relaxed)) {
      if (!n) {
        // Cannot queue the callback: wait instead of losing it.
        while (!atomic_load_explicit(&ev->ready, memory_order_relaxed))
          pthread_cond_wait(&ev->cv, &ev->mu);
      } else {
        n->fn = fn;
        n->arg = arg;
        // Append to keep registration order.
        n->next = NULL;
        iron_event_callback_node_t **pp = &ev->callbacks;
        while (*pp) pp = &(*pp)->next;
        *pp = n;
        pthread_mutex_unlock(&ev->mu);
        return;
      }
    }
    pthread_mutex_unlock(&ev->mu);
    free(n);
  }
  fn(ev->status ? iron_status_clone(ev->status) : IRON_OK, arg);
}

void iron_event_complete(iron_event_t *ev, iron_status_t status) {
  pthread_mutex_lock(&ev->mu);
  if (atomic_load_explicit(&ev->ready, memory_order_relaxed)) {
    pthread_mutex_unlock(&ev->mu);
    iron_status_free(status);
    return;
  }
  ev->status = status;
  iron_event_callback_node_t *cbs = ev->callbacks;
  ev->callbacks = NULL;
  atomic_store_explicit(&ev->ready, true, memory_order_release);
  pthread_cond_broadcast(&ev->cv);
  // Callbacks may release the last other reference: keep ours for the loop.
  iron_event_retain(ev);
  pthread_mutex_unlock(&ev->mu);
  while (cbs) {
    iron_event_callback_node_t *next = cbs->next;
    cbs->fn(ev->status ? iron_status_clone(ev->status) : IRON_OK, cbs->arg);
    free(cbs);
    cbs = next;
  }
  iron_event_release(ev);
}
