// iron-run: runs a StableHLO portable artifact on the host device, no JAX.
//
//   iron-run [-o PREFIX] [-n REPEAT] [--zeros] FILE.mlirbc [in0.npy ...]
//
// Inputs are .npy files (C or Fortran order; the element type comes from
// the program, the file's item size must match). --zeros fills missing
// inputs with zeros. Outputs are printed, or written as PREFIX0.npy,
// PREFIX1.npy ... with -o. -n runs the program REPEAT times and reports the
// mean wall time per run.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/half.h"
#include "iron/iron.h"

static char *read_all(const char *path, size_t *out_size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  if (fseek(f, 0, SEEK_END) != 0) {
    fclose(f);
    return NULL;
  }
  long n = ftell(f);
  if (n < 0) {
    fclose(f);
    return NULL;
  }
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *out_size = (size_t)n;
  return buf;
}

static int fail(iron_status_t st, const char *what) {
  fprintf(stderr, "iron-run: %s: %s: %s\n", what,
          iron_status_code_name(iron_status_code(st)),
          iron_status_message(st));
  iron_status_free(st);
  return 1;
}

// numpy descr for a dtype ("<f4"); NULL when numpy has none (bf16, f8...:
// written as raw void of the right size).
static const char *npy_descr(iron_dtype_t dt) {
  switch (dt) {
    case IRON_DTYPE_PRED: return "|b1";
    case IRON_DTYPE_S8: return "|i1";
    case IRON_DTYPE_U8: return "|u1";
    case IRON_DTYPE_S16: return "<i2";
    case IRON_DTYPE_U16: return "<u2";
    case IRON_DTYPE_S32: return "<i4";
    case IRON_DTYPE_U32: return "<u4";
    case IRON_DTYPE_S64: return "<i8";
    case IRON_DTYPE_U64: return "<u8";
    case IRON_DTYPE_F16: return "<f2";
    case IRON_DTYPE_F32: return "<f4";
    case IRON_DTYPE_F64: return "<f8";
    case IRON_DTYPE_C64: return "<c8";
    case IRON_DTYPE_C128: return "<c16";
    default: return NULL;
  }
}

// Parses a .npy file: data pointer, item size, shape, fortran order.
static int npy_parse(const char *buf, size_t size, const char *path,
                     size_t *out_item, int32_t *out_rank, int64_t *out_dims,
                     int *out_fortran, const char **out_data) {
  if (size < 10 || memcmp(buf, "\x93NUMPY", 6) != 0) {
    fprintf(stderr, "iron-run: %s: not a .npy file\n", path);
    return 1;
  }
  int major = (unsigned char)buf[6];
  size_t hlen, hoff;
  if (major == 1) {
    hlen = (unsigned char)buf[8] | ((size_t)(unsigned char)buf[9] << 8);
    hoff = 10;
  } else {
    if (size < 12) return 1;
    hlen = (unsigned char)buf[8] | ((size_t)(unsigned char)buf[9] << 8) |
           ((size_t)(unsigned char)buf[10] << 16) |
           ((size_t)(unsigned char)buf[11] << 24);
    hoff = 12;
  }
  if (hoff + hlen > size) {
    fprintf(stderr, "iron-run: %s: truncated header\n", path);
    return 1;
  }
  char *h = malloc(hlen + 1);
  memcpy(h, buf + hoff, hlen);
  h[hlen] = '\0';
  const char *d = strstr(h, "'descr':");
  const char *fo = strstr(h, "'fortran_order':");
  const char *sh = strstr(h, "'shape':");
  if (!d || !fo || !sh) {
    fprintf(stderr, "iron-run: %s: bad header %s\n", path, h);
    free(h);
    return 1;
  }
  d = strchr(d + 8, '\'');
  // descr like '<f4', '|b1', '<V2': the item size is the trailing number.
  const char *q = d ? strchr(d + 1, '\'') : NULL;
  size_t item = 0;
  if (d && q) {
    const char *p = q;
    while (p > d && p[-1] >= '0' && p[-1] <= '9') --p;
    item = (size_t)strtoul(p, NULL, 10);
    if (d[1] == '>' && item > 1) {
      fprintf(stderr, "iron-run: %s: big-endian data is not supported\n",
              path);
      free(h);
      return 1;
    }
  }
  const char *fv = fo + strlen("'fortran_order':");
  while (*fv == ' ') ++fv;
  *out_fortran = strncmp(fv, "True", 4) == 0;
  const char *p = strchr(sh, '(');
  int32_t rank = 0;
  while (p && *p && *p != ')') {
    ++p;
    while (*p == ' ' || *p == ',') ++p;
    if (*p >= '0' && *p <= '9') {
      if (rank >= 16) break;
      out_dims[rank++] = strtoll(p, (char **)&p, 10);
    }
  }
  free(h);
  *out_item = item;
  *out_rank = rank;
  *out_data = buf + hoff + hlen;
  return 0;
}

static int npy_write(const char *path, iron_dtype_t dt, int32_t rank,
                     const int64_t *dims, const void *data, size_t nbytes) {
  char descr[16];
  const char *d = npy_descr(dt);
  if (d)
    snprintf(descr, sizeof(descr), "%s", d);
  else
    snprintf(descr, sizeof(descr), "|V%zu", iron_dtype_size(dt));
  char header[512];
  int n = snprintf(header, sizeof(header),
                   "{'descr': '%s', 'fortran_order': False, 'shape': (",
                   descr);
  for (int32_t i = 0; i < rank; ++i)
    n += snprintf(header + n, sizeof(header) - (size_t)n, "%lld,%s",
                  (long long)dims[i], i + 1 < rank ? " " : "");
  n += snprintf(header + n, sizeof(header) - (size_t)n, "), }");
  // Pad so that the data starts at a multiple of 64.
  size_t total = 10 + (size_t)n + 1;
  size_t pad = (64 - total % 64) % 64;
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "iron-run: cannot write %s\n", path);
    return 1;
  }
  size_t hl = (size_t)n + pad + 1;
  unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                           (unsigned char)(hl & 0xff),
                           (unsigned char)(hl >> 8)};
  fwrite(pre, 1, 10, f);
  fwrite(header, 1, (size_t)n, f);
  for (size_t i = 0; i < pad; ++i) fputc(' ', f);
  fputc('\n', f);
  if (nbytes) fwrite(data, 1, nbytes, f);
  fclose(f);
  return 0;
}

static void print_elem(iron_dtype_t dt, const char *p) {
  switch (dt) {
    case IRON_DTYPE_PRED: printf("%s", *p ? "true" : "false"); break;
    case IRON_DTYPE_S8: printf("%d", *(const int8_t *)p); break;
    case IRON_DTYPE_U8: printf("%u", *(const uint8_t *)p); break;
    case IRON_DTYPE_S16: printf("%d", *(const int16_t *)p); break;
    case IRON_DTYPE_U16: printf("%u", *(const uint16_t *)p); break;
    case IRON_DTYPE_S32: printf("%d", *(const int32_t *)p); break;
    case IRON_DTYPE_U32: printf("%u", *(const uint32_t *)p); break;
    case IRON_DTYPE_S64: printf("%lld", *(const long long *)p); break;
    case IRON_DTYPE_U64: printf("%llu", *(const unsigned long long *)p); break;
    case IRON_DTYPE_F16: printf("%g", iron_f16_to_f32(*(const uint16_t *)p)); break;
    case IRON_DTYPE_BF16: printf("%g", iron_bf16_to_f32(*(const uint16_t *)p)); break;
    case IRON_DTYPE_F32: printf("%g", *(const float *)p); break;
    case IRON_DTYPE_F64: printf("%.17g", *(const double *)p); break;
    case IRON_DTYPE_C64:
      printf("%g%+gj", ((const float *)p)[0], ((const float *)p)[1]);
      break;
    case IRON_DTYPE_C128:
      printf("%.17g%+.17gj", ((const double *)p)[0], ((const double *)p)[1]);
      break;
    default: {
      printf("0x");
      for (size_t i = iron_dtype_size(dt); i > 0; --i)
        printf("%02x", (unsigned char)p[i - 1]);
    }
  }
}

static void print_result(uint32_t idx, iron_dtype_t dt, int32_t rank,
                         const int64_t *dims, const char *data,
                         int64_t count) {
  printf("result[%u]: tensor<", idx);
  for (int32_t i = 0; i < rank; ++i) printf("%lldx", (long long)dims[i]);
  printf("%s> = [", iron_dtype_name(dt));
  size_t es = iron_dtype_size(dt);
  int64_t shown = count < 64 ? count : 64;
  for (int64_t i = 0; i < shown; ++i) {
    if (i) printf(", ");
    print_elem(dt, data + (size_t)i * es);
  }
  if (shown < count) printf(", ... (%lld elements)", (long long)count);
  printf("]\n");
}

int main(int argc, char **argv) {
  const char *prefix = NULL, *file = NULL;
  int repeat = 1, zeros = 0;
  const char *inputs[256];
  int num_inputs = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
      prefix = argv[++i];
    } else if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
      repeat = atoi(argv[++i]);
      if (repeat < 1) repeat = 1;
    } else if (strcmp(argv[i], "--zeros") == 0) {
      zeros = 1;
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr,
              "usage: iron-run [-o PREFIX] [-n REPEAT] [--zeros] "
              "FILE.mlirbc [in.npy ...]\n");
      return 2;
    } else if (!file) {
      file = argv[i];
    } else if (num_inputs < 256) {
      inputs[num_inputs++] = argv[i];
    }
  }
  if (!file) {
    fprintf(stderr,
            "usage: iron-run [-o PREFIX] [-n REPEAT] [--zeros] FILE.mlirbc "
            "[in.npy ...]\n");
    return 2;
  }
  size_t size;
  char *bytes = read_all(file, &size);
  if (!bytes) {
    fprintf(stderr, "iron-run: cannot read %s\n", file);
    return 1;
  }
  iron_runtime_t *rt;
  iron_status_t st = iron_runtime_create(NULL, &rt);
  if (st) return fail(st, "runtime");
  iron_device_t *dev = iron_runtime_device(rt, 0);
  iron_executable_t *exe;
  st = iron_executable_compile(rt, bytes, size, NULL, &exe);
  free(bytes);
  if (st) return fail(st, file);
  uint32_t ni = iron_executable_num_inputs(exe);
  uint32_t no = iron_executable_num_outputs(exe);
  if ((uint32_t)num_inputs > ni || ((uint32_t)num_inputs < ni && !zeros)) {
    fprintf(stderr, "iron-run: %s takes %u inputs, %d given:\n",
            iron_executable_name(exe), ni, num_inputs);
    for (uint32_t i = 0; i < ni; ++i) {
      iron_dtype_t dt;
      int32_t rank;
      const int64_t *dims;
      iron_executable_input_type(exe, i, &dt, &rank, &dims);
      fprintf(stderr, "  input %u: tensor<", i);
      for (int32_t k = 0; k < rank; ++k)
        fprintf(stderr, "%lldx", (long long)dims[k]);
      fprintf(stderr, "%s>\n", iron_dtype_name(dt));
    }
    return 1;
  }
  iron_buffer_t **args = calloc(ni + 1, sizeof(*args));
  for (uint32_t i = 0; i < ni; ++i) {
    iron_dtype_t dt;
    int32_t rank;
    const int64_t *dims;
    iron_executable_input_type(exe, i, &dt, &rank, &dims);
    size_t es = iron_dtype_size(dt);
    if (i >= (uint32_t)num_inputs) {
      int64_t count = 1;
      for (int32_t k = 0; k < rank; ++k) count *= dims[k];
      void *z = calloc((size_t)count + 1, es ? es : 1);
      st = iron_buffer_create_from_host(dev, dt, rank, dims, z, NULL,
                                        &args[i]);
      free(z);
      if (st) return fail(st, "input");
      continue;
    }
    size_t fsize;
    char *fb = read_all(inputs[i], &fsize);
    if (!fb) {
      fprintf(stderr, "iron-run: cannot read %s\n", inputs[i]);
      return 1;
    }
    size_t item;
    int32_t frank;
    int64_t fdims[16];
    int fortran;
    const char *data;
    if (npy_parse(fb, fsize, inputs[i], &item, &frank, fdims, &fortran,
                  &data))
      return 1;
    int64_t count = 1;
    for (int32_t k = 0; k < frank; ++k) count *= fdims[k];
    if (item != (es ? es : 1) && !(dt == IRON_DTYPE_TOKEN)) {
      fprintf(stderr, "iron-run: %s: items of %zu bytes, input %u is %s\n",
              inputs[i], item, i, iron_dtype_name(dt));
      return 1;
    }
    if ((size_t)(data - fb) + (size_t)count * es > fsize) {
      fprintf(stderr, "iron-run: %s: truncated data\n", inputs[i]);
      return 1;
    }
    int64_t strides[16];
    if (fortran) {
      int64_t s = (int64_t)es;
      for (int32_t k = 0; k < frank; ++k) {
        strides[k] = s;
        s *= fdims[k];
      }
    }
    st = iron_buffer_create_from_host(dev, dt, frank, fdims, data,
                                      fortran ? strides : NULL, &args[i]);
    free(fb);
    if (st) return fail(st, inputs[i]);
  }
  iron_buffer_t **outs = calloc(no + 1, sizeof(*outs));
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int r = 0; r < repeat; ++r) {
    if (r)
      for (uint32_t i = 0; i < no; ++i) iron_buffer_release(outs[i]);
    iron_event_t *done;
    st = iron_executable_execute(exe, args, ni, NULL, outs, &done);
    if (st) return fail(st, "execute");
    st = iron_event_wait(done);
    iron_event_release(done);
    if (st) return fail(st, "run");
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  if (repeat > 1)
    fprintf(stderr, "iron-run: %d runs, %.1f us per run\n", repeat,
            ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) /
                1e3 / repeat);
  int rc = 0;
  for (uint32_t i = 0; i < no; ++i) {
    size_t nb = iron_buffer_size_in_bytes(outs[i]);
    char *host = malloc(nb + 1);
    iron_event_t *done;
    st = iron_buffer_to_host(outs[i], host, nb, &done);
    if (!st) {
      st = iron_event_wait(done);
      iron_event_release(done);
    }
    if (st) return fail(st, "to_host");
    iron_dtype_t dt = iron_buffer_dtype(outs[i]);
    int32_t rank = iron_buffer_rank(outs[i]);
    const int64_t *dims = iron_buffer_dims(outs[i]);
    int64_t count = 1;
    for (int32_t k = 0; k < rank; ++k) count *= dims[k];
    if (prefix) {
      char path[4096];
      snprintf(path, sizeof(path), "%s%u.npy", prefix, i);
      rc |= npy_write(path, dt, rank, dims, host, nb);
    } else {
      print_result(i, dt, rank, dims, host, dt == IRON_DTYPE_TOKEN ? 0 : count);
    }
    free(host);
    iron_buffer_release(outs[i]);
  }
  for (uint32_t i = 0; i < ni; ++i) iron_buffer_release(args[i]);
  free(args);
  free(outs);
  iron_executable_release(exe);
  iron_runtime_release(rt);
  return rc;
}
