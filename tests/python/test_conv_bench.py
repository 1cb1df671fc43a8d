"""bench/conv_bench.py must not rot: at --small sizes, every program (each
convolution forward, input and weight gradient, and the CNN step) runs on
iron (whatever device it has, with and without cuDNN) and on XLA:CPU, and
iron's results match."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# A smoke run of the benchmark script (minutes on 2 cores); the convolutions
# themselves are checked by test_conv_cnn.py and the conformance suite.
@pytest.mark.slow
def test_conv_bench_small_runs_and_matches(iron_device):
    env = dict(os.environ)
    env.setdefault("IRON_DEVICE", "cuda" if "NVIDIA" in iron_device.device_kind else "host")
    env["PYTHONPATH"] = os.path.join(ROOT, "python") + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, os.path.join(ROOT, "bench", "conv_bench.py"), "--small",
           "--frameworks", "iron,iron-nocudnn,xla-cpu", "--rounds", "1", "--steps", "1",
           "--warmup", "0", "--only", "L1_*,L4_*,cnn_step*"]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [ln for ln in r.stdout.splitlines()
            if ln.startswith(("L1_", "L4_", "cnn_step_"))]
    # 3 + 3 convolution programs and the step, in f32 and bf16
    assert len(rows) == 14, r.stdout
    for ln in rows:
        assert "MISMATCH" not in ln and "Error" not in ln, ln
        assert ln.count("iron ") == 1 and ln.count("iron-nocudnn ") == 1, ln
