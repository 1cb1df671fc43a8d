#!/usr/bin/env bash
# Twentieth session's third planned call (not run): build; the model zoo
# and the row-fusion programs on CUDA; the GPU fuzzer for 3 minutes with
# the passes' 1 MiB floor off (IRON_FUSE_MIN_COPY_BYTES=0: small programs
# take the recompute, producer-merge and spread paths).
set -u
export OUT
IRON_FUSE_MIN_COPY_BYTES=0 FUZZ_MINUTES=3 timeout 590 \
  scripts/gpu_session.sh build zoo rowtests fuzzgpu
