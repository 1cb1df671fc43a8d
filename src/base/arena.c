#include "base/arena.h"

#include <stdlib.h>
#include <string.h>

struct iron_arena_block {
  iron_arena_block_t *next;
  size_t size;
  size_t used;
  _Alignas(16) unsigned char data[];
};

enum { IRON_ARENA_BLOCK_SIZE = 64 * 1024 };

void iron_arena_init(iron_arena_t *arena) {
  arena->head = NULL;
  arena->total_bytes = 0;
}

void iron_arena_deinit(iron_arena_t *arena) {
  iron_arena_block_t *b = arena->head;
  while (b) {
    iron_arena_block_t *next = b->next;
    free(b);
    b = next;
  }
  arena->head = NULL;
  arena->total_bytes = 0;
}

void *iron_arena_alloc(iron_arena_t *arena, size_t size) {
  if (size > SIZE_MAX / 2) return NULL;
  size_t rounded = (size + 15) & ~(size_t)15;
  if (rounded == 0) rounded = 16;
  iron_arena_block_t *b = arena->head;
  if (!b || b->size - b->used < rounded) {
    size_t cap = rounded > IRON_ARENA_BLOCK_SIZE / 4 ? rounded
                                                     : IRON_ARENA_BLOCK_SIZE;
    iron_arena_block_t *nb = malloc(sizeof(*nb) + cap);
    if (!nb) return NULL;
    nb->size = cap;
    nb->used = 0;
    if (rounded == cap && b) {
      // A large dedicated block: link it behind the head so the head's free
      // space stays usable.
      nb->next = b->next;
      b->next = nb;
    } else {
      nb->next = b;
      arena->head = nb;
    }
    b = nb;
  }
  void *p = b->data + b->used;
  b->used += rounded;
  arena->total_bytes += rounded;
  memset(p, 0, size);
  return p;
}

void *iron_arena_alloc_array(iron_arena_t *arena, size_t count, size_t size) {
  size_t total;
  if (iron_mul_overflow_size(count, size, &total)) return NULL;
  return iron_arena_alloc(arena, total);
}

char *iron_arena_strndup(iron_arena_t *arena, const char *s, size_t len) {
  char *p = iron_arena_alloc(arena, len + 1);
  if (!p) return NULL;
  if (len) memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

char *iron_arena_strdup(iron_arena_t *arena, const char *s) {
  return iron_arena_strndup(arena, s, strlen(s));
}

void *iron_arena_memdup(iron_arena_t *arena, const void *p, size_t len) {
  void *q = iron_arena_alloc(arena, len);
  if (q && len) memcpy(q, p, len);
  return q;
}
