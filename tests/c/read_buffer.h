// Copies a buffer's contents to the host and waits for them: the C tests'
// one way of reading a result back.
#ifndef IRON_TESTS_READ_BUFFER_H_
#define IRON_TESTS_READ_BUFFER_H_

#include <stddef.h>

#include "iron/iron.h"

static inline iron_status_t test_read_buffer(iron_buffer_t *b, void *dst,
                                             size_t n) {
  iron_event_t *done = NULL;
  iron_status_t st = iron_buffer_to_host(b, dst, n, &done);
  if (st) return st;
  st = iron_event_wait(done);
  iron_event_release(done);
  return st;
}

#endif  // IRON_TESTS_READ_BUFFER_H_
