#!/usr/bin/env bash
# Seventeenth session's one-call plan (build, decode A/B of scan_in_place on
# a quiet GPU, then pyall beside the finds and the remainder probe).
set -u
export OUT GPU_SESSION_NOPACK=1
DECODE_TIMEOUT=110 DECODE_ARGS="--frameworks iron,xla" \
  DECODE_AB="IRON_SCAN_IN_PLACE=0 IRON_SCAN_IN_PLACE=1" \
  timeout 380 scripts/gpu_session.sh build decodeab 2>&1 | tail -70
FINDS="26297024:big 26298356:big" PYALL_TIMEOUT=230 \
  timeout 250 scripts/gpu_session.sh pyall\& finds wait 2>&1 | tail -90 &
mkdir -p $OUT/logs
for d in host cuda; do
  JAX_PLATFORMS=iron,cpu IRON_PLUGIN_PATH=build-dev/libiron_pjrt.so PYTHONPATH=python \
    IRON_DEVICE=$d timeout 60 python3 scripts/debug/rem_denormal_probe.py
done > $OUT/logs/remprobe.log 2>&1
grep "pairs differ" $OUT/logs/remprobe.log
wait
tar czf $OUT/logs.tgz -C $OUT logs; rm -rf $OUT/logs
