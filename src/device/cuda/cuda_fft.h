// stablehlo.fft on the CUDA device (cuda_fft.c): cuFFT plans plus two small
// generated kernels, exposed here so CI compiles them with NVRTC.
#ifndef IRON_DEVICE_CUDA_CUDA_FFT_H_
#define IRON_DEVICE_CUDA_CUDA_FFT_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"

#ifdef __cplusplus
extern "C" {
#endif

// Multiplies `count` reals (float, or double when `wide`) in place by
// `scale` (rounded to float first when not wide, as the host does).
// Kernel `name(T *data)`, 1-D grid of 256-thread blocks (*out_grid).
iron_status_t iron_cuda_gen_fft_scale(const char *name, bool wide,
                                      int64_t count, double scale,
                                      char **out_src, unsigned *out_grid);

// IRFFT input fix-up, in place on `lines` lines of `half` = n/2 + 1
// complex values: zeroes the imaginary parts of the DC entry and (even n)
// the Nyquist entry, which the real transform ignores (host fft.c), so
// cuFFT's C2R sees a well-formed half spectrum. Kernel `name(T *data)` over
// the interleaved reals; *out_grid blocks of 256 threads.
iron_status_t iron_cuda_gen_fft_fix(const char *name, bool wide, int64_t lines,
                                    int64_t n, char **out_src,
                                    unsigned *out_grid);

#ifdef __cplusplus
}
#endif

#endif  // IRON_DEVICE_CUDA_CUDA_FFT_H_
