#!/usr/bin/env bash
# The eighth session's last GPU call: suite + conformance side by side,
# the real-GPU parts of two emulation tests (default switches and the
# ewfast switches off), then the kernels benchmark alone.
cd "$(dirname "$0")/../.."
S=scripts/gpu_session.sh
export GPU_SESSION_NOPACK=1
$S build || exit 1
T=build-dev/tests
OFF="IRON_CUDA_FTZ_OPS=0 IRON_CUDA_HW_ROUND=0 IRON_CUDA_VECTORIZE_MATH=0 IRON_CUDA_SELECT_MINMAX=0 IRON_CUDA_ROW_STAGE_OUT=0"
( $S suite > $OUT/suite_stage.txt 2>&1 &
  $S conformance > $OUT/conf_stage.txt 2>&1 &
  ( for t in test_cuda_scalar_ops_emu test_cuda_complex_emu; do
      IRON_TEST_REQUIRE_CUDA=1 timeout 200 $T/$t > $OUT/$t.on.txt 2>&1; echo "$t on: rc=$?";
      env $OFF IRON_TEST_REQUIRE_CUDA=1 timeout 200 $T/$t > $OUT/$t.off.txt 2>&1; echo "$t off: rc=$?";
    done ) > $OUT/emu_stage.txt 2>&1 &
  wait )
cat $OUT/suite_stage.txt | tail -12; echo; tail -4 $OUT/conf_stage.txt; cat $OUT/emu_stage.txt
for f in $OUT/test_cuda_*.txt; do echo "== $f"; grep -iE "differ|FAIL|mismatch" $f | grep -v " 0 differ" | head -8; done
KERNELS_ARGS="--only sum_f32_256m,sum_bf16_256m,softmax_f32,softmax_bf16,transpose_f32,transpose_bf16,chain8_f32,chain8_bf16,argmax_rows_f32,argmax_full_f32,colsum_narrow_f32,bn_stats_f32,newton_while,cnn_f32,cnn_bf16 --rounds 1 --budget-s 1.5" $S kernels > $OUT/kern_stage.txt 2>&1
tail -30 $OUT/kern_stage.txt
tar czf "$OUT/logs.tgz" -C "$OUT" logs 2>/dev/null && rm -rf "$OUT/logs"
mkdir -p $OUT/t && mv $OUT/*.txt $OUT/t/ 2>/dev/null; tar czf $OUT/stages.tgz -C $OUT t && rm -rf $OUT/t
