// Host-time sampler for the GPU benchmarks (bench/kernels.py --host-profile).
//
// Where does a program's host time go between kernel launches? The GPU
// machine has no perf, so this samples the process itself: SIGPROF at a
// fixed rate of CPU time, and at each tick the interrupted thread's call
// stack (glibc backtrace) is stored. hp_stop writes the stacks and
// /proc/self/maps; bench/host_profile.py turns the addresses into function
// names (addr2line) and prints where the time went, self and inclusive.
//
// Built by kernels.py on the GPU machine (gcc -shared), loaded through
// ctypes. Not part of the plugin.
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#define HP_DEPTH 32
#define HP_MAX 40000

static void *g_frames[HP_MAX][HP_DEPTH];
static unsigned char g_depth[HP_MAX];
static size_t g_n;
static uint64_t g_lost;

static void on_prof(int sig, siginfo_t *info, void *uctx) {
  (void)sig;
  (void)info;
  (void)uctx;
  size_t i = __atomic_fetch_add(&g_n, 1, __ATOMIC_RELAXED);
  if (i >= HP_MAX) {
    __atomic_fetch_add(&g_lost, 1, __ATOMIC_RELAXED);
    return;
  }
  g_depth[i] = (unsigned char)backtrace(g_frames[i], HP_DEPTH);
}

static void set_timer(long usec) {
  struct itimerval it;
  memset(&it, 0, sizeof(it));
  it.it_interval.tv_usec = usec;
  it.it_value.tv_usec = usec;
  setitimer(ITIMER_PROF, &it, NULL);
}

// Starts sampling at `hz` ticks per second of process CPU time.
int hp_start(int hz) {
  void *warm[4];
  backtrace(warm, 4);  // loads the unwinder outside the signal handler
  g_n = 0;
  g_lost = 0;
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = on_prof;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGPROF, &sa, NULL)) return -1;
  set_timer(hz > 0 && hz <= 20000 ? 1000000 / hz : 1000);
  return 0;
}

// Stops sampling and writes "S depth addr..." lines, then the maps.
// Returns the number of samples written.
long hp_stop(const char *path) {
  set_timer(0);
  signal(SIGPROF, SIG_IGN);
  size_t n = g_n < HP_MAX ? g_n : HP_MAX;
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "lost %llu\n", (unsigned long long)g_lost);
  for (size_t i = 0; i < n; ++i) {
    fprintf(f, "S");
    for (int d = 0; d < g_depth[i]; ++d)
      fprintf(f, " %llx", (unsigned long long)(uintptr_t)g_frames[i][d]);
    fprintf(f, "\n");
  }
  fprintf(f, "MAPS\n");
  FILE *m = fopen("/proc/self/maps", "r");
  if (m) {
    char line[4096];
    while (fgets(line, sizeof(line), m)) fputs(line, f);
    fclose(m);
  }
  fclose(f);
  return (long)n;
}
