#!/usr/bin/env bash
# The GPU-only fuzz finds (fourteenth session: fz_26297024, fz_26298356)
# under the switches that tell a compiler problem from a planning one, the
# integer wrap-around sweep (tests/python/test_int_wrap.py) on CUDA, and
# the SASS of the finds' kernels where the machine has a disassembler.
# Needs build-dev (scripts/gpu_session.sh build). Logs under $OUT/finds.
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/iron-out}/finds
mkdir -p "$out"
h=build-dev/tests/test_cuda_fuzz_programs
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$PWD/build-dev/kcache}
run() {
  local seed=$1; shift
  echo "== fz_$seed $*"
  env IRON_TEST_SHOW_DIFFS=4 "$@" timeout 120 python3 tests/fuzz_programs.py run \
    --device cuda --harness $h --seed "$seed" --count 1 --big >"$out/run.log" 2>&1
  echo "rc=$?"; grep -vE "^\s*$" "$out/run.log" | grep -iE "fail|fuzz:|differ|host|cuda|error" | head -14
}
# Which kernel's optimized code differs: each kernel alone without
# optimization (IRON_CUDA_NVRTC_OPT=0:NAME).
for s in 26297024 26298356; do
  run $s
  d=$out/k$s; mkdir -p $d
  python3 tests/fuzz_programs.py gen --seed $s --count 1 --big --out $d >/dev/null 2>&1
  for k in $(build-dev/iron-dump --cuda-kernels $d/fz_$s.mlirbc 2>/dev/null |
             grep -oE '__global__ void (__launch_bounds__\([0-9]+\) )?iron_[a-z_]+_[0-9a-f]+' |
             grep -oE 'iron_[a-z_]+_[0-9a-f]+$'); do
    run $s IRON_CUDA_NVRTC_OPT=0:$k | head -2
  done
done
echo "== ptxas_neg16 probe"
JAX_PLATFORMS=cuda,cpu timeout 120 python3 scripts/debug/ptxas_neg16.py 2>&1 | tail -20
echo "== test_int_wrap on CUDA"
IRON_PLUGIN_PATH=$PWD/build-dev/libiron_pjrt.so PYTHONPATH=$PWD/python IRON_DEVICE=cuda \
  JAX_PLATFORMS=iron,cpu IRON_TEST_REQUIRE_CUDA=1 timeout 200 python3 -m pytest -q \
  -p no:cacheprovider -p no:benchmark tests/python/test_int_wrap.py 2>&1 | grep -E "^E  |passed|failed" | head -40
echo "== IRON_CUDA_NVRTC_OPT=0 test_int_wrap on CUDA"
IRON_CUDA_NVRTC_OPT=0 IRON_PLUGIN_PATH=$PWD/build-dev/libiron_pjrt.so PYTHONPATH=$PWD/python IRON_DEVICE=cuda \
  JAX_PLATFORMS=iron,cpu IRON_TEST_REQUIRE_CUDA=1 timeout 200 python3 -m pytest -q \
  -p no:cacheprovider -p no:benchmark tests/python/test_int_wrap.py 2>&1 | grep -E "^E  |passed|failed" | head -40
# SASS: the finds' kernels compiled by NVRTC as the device does, then
# disassembled (nvdisasm / cuobjdump, wherever the machine has them).
dis=$(command -v nvdisasm || find / -name nvdisasm -type f 2>/dev/null | head -1)
cob=$(command -v cuobjdump || find / -name cuobjdump -type f 2>/dev/null | head -1)
nvrtc=$(find / -name "libnvrtc.so*" -type f 2>/dev/null | grep -vE "builtins|stubs" | head -1)
echo "== tools: nvdisasm=$dis cuobjdump=$cob nvrtc=$nvrtc"
python3 - "$out" "$nvrtc" "$dis" "$cob" <<'PY'
import ctypes, glob, os, subprocess, sys
out, nvrtc, dis, cob = sys.argv[1:5]
if not nvrtc:
    sys.exit("no libnvrtc")
lib = ctypes.CDLL(nvrtc)
for fz in ("26297024", "26298356"):
    d = os.path.join(out, "k" + fz)
    os.makedirs(d, exist_ok=True)
    subprocess.run(["build-dev/iron-dump", "--cuda-sources", d, f"{d}/fz_{fz}.mlirbc"],
                   check=True, capture_output=True)
    for cu in sorted(glob.glob(f"{d}/kernel*.cu")):
        src = open(cu).read()
        prog = ctypes.c_void_p()
        lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"ironjax.cu", 0, None, None)
        keep = "ftz=0" in src.split("\n", 1)[0]
        opts = [b"--gpu-architecture=sm_90a", b"-default-device", b"-std=c++17",
                b"-ftz=false" if keep else b"-ftz=true", b"-prec-div=true",
                b"-prec-sqrt=true", b"-fmad=false"]
        arr = (ctypes.c_char_p * len(opts))(*opts)
        r = lib.nvrtcCompileProgram(prog, len(opts), arr)
        n = ctypes.c_size_t()
        if r:
            print(cu, "compile failed", r); continue
        lib.nvrtcGetCUBINSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        lib.nvrtcGetCUBIN(prog, buf)
        cub = cu[:-3] + ".cubin"
        open(cub, "wb").write(buf.raw)
        tool = [dis, "-c", cub] if dis else ([cob, "-sass", cub] if cob else None)
        if tool:
            sass = subprocess.run(tool, capture_output=True, text=True).stdout
            open(cu[:-3] + ".sass", "w").write(sass)
            print(cu, len(sass.splitlines()), "SASS lines")
PY
