#include "base/fpenv.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

uint64_t iron_fpenv_get(void) {
#if defined(__x86_64__) || defined(__i386__)
  return _mm_getcsr();
#elif defined(__aarch64__)
  uint64_t v;
  __asm__ volatile("mrs %0, fpcr" : "=r"(v));
  return v;
#else
  return 0;
#endif
}

void iron_fpenv_set(uint64_t env) {
#if defined(__x86_64__) || defined(__i386__)
  _mm_setcsr((unsigned)env);
#elif defined(__aarch64__)
  __asm__ volatile("msr fpcr, %0" : : "r"(env));
#else
  (void)env;
#endif
}

uint64_t iron_fpenv_flush_enter(void) {
  uint64_t old = iron_fpenv_get();
#if defined(__x86_64__) || defined(__i386__)
  iron_fpenv_set(old | 0x8040u);  // FTZ (bit 15) | DAZ (bit 6)
#elif defined(__aarch64__)
  iron_fpenv_set(old | (1ull << 24));  // FZ
#endif
  return old;
}

void iron_fpenv_restore(uint64_t saved) {
  if (iron_fpenv_get() != saved) iron_fpenv_set(saved);
}
