// <complex.h> plus CMPLX/CMPLXF where the C library leaves them out: glibc
// defines them only for gcc, and clang 14 (our fuzz and sanitizer builds)
// has the builtin they expand to. Both keep a signed-zero or infinite
// imaginary part intact, which x + y*I does not.
#ifndef IRON_BASE_CPLX_H_
#define IRON_BASE_CPLX_H_

#include <complex.h>

#ifndef CMPLXF
#define CMPLXF(x, y) __builtin_complex((float)(x), (float)(y))
#endif
#ifndef CMPLX
#define CMPLX(x, y) __builtin_complex((double)(x), (double)(y))
#endif

#endif  // IRON_BASE_CPLX_H_
