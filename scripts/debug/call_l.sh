#!/usr/bin/env bash
# Twentieth session's second planned call (not run: no GPU was lent):
# build, then jax's 20 core files and every tests/python file on CUDA side
# by side, on this session's passes (merge_producers, the row pass's
# dependency sets and spread copies). Logs packed into $OUT/logs.tgz.
set -u
export OUT
SUITE_DEADLINE=280 SUITE_TIMEOUT=280 PYALL_TIMEOUT=420 PYALL_JOBS=6 SUITE_JOBS=9 \
  timeout 590 scripts/gpu_session.sh build suite\& pyall\& wait
