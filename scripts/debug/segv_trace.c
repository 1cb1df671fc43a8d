// Crash stacks on a machine without gdb (the GPU machine): preload this
// (LD_PRELOAD=libsegv_trace.so, built by gcc -shared -fPIC) and a SIGSEGV,
// SIGBUS, SIGILL or SIGABRT prints the native call stack and the process's
// executable mappings to stderr, so addr2line can name frames of static
// functions afterwards. Python's faulthandler must be off (pytest -p
// no:faulthandler), or it replaces this handler. Not part of the plugin.
#define _GNU_SOURCE
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_fault(int sig) {
  void *frames[64];
  int n = backtrace(frames, 64);
  static const char head[] = "\n=== segv_trace: fatal signal, native stack:\n";
  (void)!write(2, head, sizeof(head) - 1);
  backtrace_symbols_fd(frames, n, 2);
  static const char maps[] = "=== segv_trace: executable mappings:\n";
  (void)!write(2, maps, sizeof(maps) - 1);
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd >= 0) {
    char buf[4096];
    ssize_t k;
    while ((k = read(fd, buf, sizeof(buf))) > 0) (void)!write(2, buf, (size_t)k);
    close(fd);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void segv_trace_init(void) {
  void *warm[2];
  backtrace(warm, 2);  // loads the unwinder before any fault
  int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGABRT};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); ++i) signal(sigs[i], on_fault);
}
