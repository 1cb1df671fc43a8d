#!/usr/bin/env bash
# The random-program fuzzer (tests/fuzz_programs.py) on the GPU machine, one
# command: builds this tree (build-dev, Release), then for MINUTES minutes
# generates random programs (batches of 100; half with larger shapes:
# multi-block grids, vectorized bodies, wide reduces) and runs each through
# test_cuda_fuzz_programs with IRON_TEST_FUZZ_DEVICE=cuda: compiled and run
# on the host device and on the real CUDA device in the same process, on
# the same inputs (4 seeds each: small values, out-of-range start indices,
# special values), compared bit for bit, or within a tolerance for programs
# whose manifest line says "inexact" (libdevice vs libm, float sums in
# another order). Prints the counts of programs and failures; every
# failing program with the command that reproduces it (on a GPU machine:
# add --device cuda). Logs under $OUT (default /tmp/iron-out): fuzz.log,
# fuzz_big.log, and the failing batches' programs in fuzz_keep*/.
# Usage (through the device tool): scripts/fuzz_programs_gpu.sh [MINUTES]
# (default 8; JOBS harness processes in parallel, default 8). Afterwards
# the first BISECT (default 6) failing programs are re-run under -G and
# kernel by kernel (a compiler fault or not; scripts/debug/gpu_finds.sh).
set -uo pipefail
minutes=${1:-8}
jobs=${JOBS:-8}
out=${OUT:-/tmp/iron-out}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
nvidia-smi -L 2>&1 | head -2
t0=$(date +%s)
cmake -S . -B build-dev -G Ninja -DCMAKE_BUILD_TYPE=Release -DIRON_WERROR=OFF \
  >"$out/cmake.log" 2>&1 &&
  ninja -C build-dev test_cuda_fuzz_programs >>"$out/cmake.log" 2>&1 ||
  { tail -40 "$out/cmake.log"; exit 1; }
echo "built in $(( $(date +%s) - t0 ))s"
export IRON_CACHE_DIR=${IRON_CACHE_DIR:-$root/build-dev/kcache}
export PYTHONUNBUFFERED=1
# Half the time each: ordinary shapes, then larger ones (seeds far apart so
# the two runs never share a program).
left=$(python3 -c "print(max(1.0, ($minutes * 60 - ($(date +%s) - $t0)) / 120))")
rc=0
seed=${SEED:-$(( ($(date +%s) % 100000) * 1000 ))}
echo "== ordinary shapes, $left min, seeds from $seed"
python3 tests/fuzz_programs.py run --device cuda \
  --harness build-dev/tests/test_cuda_fuzz_programs --seed "$seed" --count 0 \
  --batch 100 --jobs "$jobs" --minutes "$left" --keep "$out/fuzz_keep" \
  >"$out/fuzz.log" 2>&1 || rc=1
grep -E "^fuzz:|^FAIL|reproduce|fresh" "$out/fuzz.log" | head -60
echo "== larger shapes (--big), $left min, seeds from $(( seed + 500000 ))"
python3 tests/fuzz_programs.py run --device cuda --big \
  --harness build-dev/tests/test_cuda_fuzz_programs \
  --seed $(( seed + 500000 )) --count 0 --batch 50 --jobs "$jobs" \
  --minutes "$left" --keep "$out/fuzz_keep_big" \
  >"$out/fuzz_big.log" 2>&1 || rc=1
grep -E "^fuzz:|^FAIL|reproduce" "$out/fuzz_big.log" | head -60
# Keep only the batches that hold a failing program.
python3 - "$out" <<'EOF'
import glob, os, re, shutil, sys
out = sys.argv[1]
for log, keep in (("fuzz.log", "fuzz_keep"), ("fuzz_big.log", "fuzz_keep_big")):
    path = os.path.join(out, log)
    if not os.path.exists(path):
        continue
    text = open(path).read()
    failing = set(re.findall(r"^FAIL (fz_\d+)", text, re.M))
    for d in glob.glob(os.path.join(out, keep, "b*")):
        names = {f[:-7] for f in os.listdir(d) if f.endswith(".mlirbc")}
        if not names & failing:
            shutil.rmtree(d, ignore_errors=True)
    print(f"{log}: {len(failing)} failing programs kept under {keep}/")
EOF
# Which failures are the compiler's: the first failing programs again,
# optimized, with -G, and with each kernel alone under -G
# (scripts/debug/gpu_finds.sh; BISECT=0 skips, BISECT=N bisects N).
n=${BISECT:-6}
if [ "$n" != 0 ] && [ $rc != 0 ]; then
  finds=$( { grep -oE "^FAIL fz_[0-9]+" "$out/fuzz.log" 2>/dev/null | sed 's/FAIL fz_//' | head -"$n"
             grep -oE "^FAIL fz_[0-9]+" "$out/fuzz_big.log" 2>/dev/null | sed 's/FAIL fz_//;s/$/:big/' | head -"$n"; } |
           head -"$n" | paste -sd' ')
  echo "== bisect: $finds"
  FINDS="$finds" WRAP=0 PROBE=0 OUT=$out scripts/debug/gpu_finds.sh 2>&1 |
    grep -E "^== fz_|NVRTC_OPT=0: |rc=0" | head -80
fi
echo "total $(( $(date +%s) - t0 ))s"
exit $rc
