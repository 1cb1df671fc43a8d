// A bump allocator for objects that live and die together (an IR module, a
// compiled plan). Allocation is not thread-safe; freeing the arena frees all.
#ifndef IRON_BASE_ARENA_H_
#define IRON_BASE_ARENA_H_

#include <stddef.h>
#include <stdint.h>

#include "base/status.h"

typedef struct iron_arena_block iron_arena_block_t;

typedef struct iron_arena {
  iron_arena_block_t *head;
  size_t total_bytes;  // bytes handed out, for diagnostics
} iron_arena_t;

void iron_arena_init(iron_arena_t *arena);
void iron_arena_deinit(iron_arena_t *arena);

// Returns zeroed, 16-byte aligned memory or NULL when out of memory (or when
// size overflows).
void *iron_arena_alloc(iron_arena_t *arena, size_t size);
// Overflow-checked count*size allocation.
void *iron_arena_alloc_array(iron_arena_t *arena, size_t count, size_t size);
// Copies `len` bytes and appends a NUL.
char *iron_arena_strndup(iron_arena_t *arena, const char *s, size_t len);
char *iron_arena_strdup(iron_arena_t *arena, const char *s);
void *iron_arena_memdup(iron_arena_t *arena, const void *p, size_t len);

// Overflow-checked arithmetic helpers used when computing sizes from shapes.
// Return false on overflow.
static inline int iron_mul_overflow_i64(int64_t a, int64_t b, int64_t *out) {
  return __builtin_mul_overflow(a, b, out);
}
static inline int iron_mul_overflow_size(size_t a, size_t b, size_t *out) {
  return __builtin_mul_overflow(a, b, out);
}

#endif  // IRON_BASE_ARENA_H_
