// The calling thread's floating-point environment: whether denormals are
// flushed to zero (x86 MXCSR FTZ and DAZ, AArch64 FPCR FZ). XLA:CPU runs
// its programs with both set; the host device does the same for every job
// (device.h: flush_denormals), and the thread pool runs each parallel
// region's chunks in the environment of the thread that started it.
#ifndef IRON_BASE_FPENV_H_
#define IRON_BASE_FPENV_H_

#include <stdint.h>

// The environment word (MXCSR or FPCR; 0 where neither exists).
uint64_t iron_fpenv_get(void);
void iron_fpenv_set(uint64_t env);
// Turns flushing on; returns what iron_fpenv_restore puts back.
uint64_t iron_fpenv_flush_enter(void);
void iron_fpenv_restore(uint64_t saved);

#endif  // IRON_BASE_FPENV_H_
