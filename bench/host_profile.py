"""Host-time profile of a benchmark program (bench/kernels.py --host-profile).

Samples the process's call stacks at a fixed rate of CPU time while a
program runs (bench/host_profile.c, SIGPROF + backtrace), then names the
frames: functions of the iron plugin by addr2line, everything else by its
library. Prints the functions where the samples stopped (self) and the
functions on the stacks (inclusive), so that host overhead between kernel
launches can be located on a machine without perf.
"""
import bisect
import collections
import ctypes
import os
import subprocess
import tempfile

HP_DIR = os.path.join(os.environ.get("TMPDIR", "/tmp"), "ironjax_host_profile")


def build():
    os.makedirs(HP_DIR, exist_ok=True)
    out = os.path.join(HP_DIR, "libhost_profile.so")
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "host_profile.c")
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(src):
        subprocess.run(["gcc", "-std=c17", "-O2", "-shared", "-fPIC", src, "-o", out],
                       check=True)
    return out


def _read(path):
    samples, maps, in_maps = [], [], False
    with open(path) as fh:
        for line in fh:
            if in_maps:
                parts = line.split()
                if len(parts) >= 6 and "x" in parts[1]:
                    lo, hi = (int(v, 16) for v in parts[0].split("-"))
                    maps.append((lo, hi, int(parts[2], 16), parts[5]))
            elif line.startswith("MAPS"):
                in_maps = True
            elif line.startswith("S"):
                samples.append([int(a, 16) for a in line.split()[1:]])
    maps.sort()
    return samples, maps


def _symbolize(addrs, maps, lib_match):
    """Returns {addr: name}: plugin functions by addr2line, others by library."""
    starts = [m[0] for m in maps]
    names, per_lib = {}, collections.defaultdict(list)
    for a in addrs:
        i = bisect.bisect_right(starts, a) - 1
        if i < 0 or a >= maps[i][1]:
            names[a] = "?"
            continue
        lo, _, off, path = maps[i]
        if lib_match in os.path.basename(path):
            per_lib[path].append((a, a - lo + off))
        else:
            names[a] = f"[{os.path.basename(path)}]"
    for path, pairs in per_lib.items():
        # addr2line wants addresses of the file's load view: for the shared
        # objects built here the first segment is at 0, so file offsets of
        # executable segments are their addresses.
        q = "\n".join(hex(o) for _, o in pairs)
        try:
            r = subprocess.run(["addr2line", "-f", "-C", "-e", path], input=q,
                               capture_output=True, text=True, check=True)
            lines = r.stdout.split("\n")
            for k, (a, _) in enumerate(pairs):
                fn = lines[2 * k] if 2 * k < len(lines) else "?"
                names[a] = fn if fn != "??" else f"[{os.path.basename(path)}+{hex(a)}]"
        except (OSError, subprocess.CalledProcessError):
            for a, o in pairs:
                names[a] = f"[{os.path.basename(path)}+{hex(o)}]"
    return names


def profile(fn, sync, n, seconds=3.0, hz=1000, lib_match="iron", top=25):
    """Runs sync(fn()) at least n times and for at least `seconds` under the
    sampler; returns report lines. (CPU-time timers tick with the kernel's
    clock, a few ms: the samples need seconds of runs, not a few calls.)"""
    import time
    hp = ctypes.CDLL(build())
    hp.hp_stop.restype = ctypes.c_long
    sync(fn())
    fd, path = tempfile.mkstemp(prefix="hp_", suffix=".txt", dir=HP_DIR)
    os.close(fd)
    hp.hp_start(hz)
    runs, t0, c0 = 0, time.perf_counter(), time.process_time()
    while runs < n or time.perf_counter() - t0 < seconds:
        sync(fn())
        runs += 1
    n = runs
    cpu_ms = (time.process_time() - c0) * 1000.0 / n  # all threads
    got = hp.hp_stop(path.encode())
    samples, maps = _read(path)
    os.unlink(path)
    # Frames 0-1 are the handler and the signal trampoline.
    stacks = [s[2:] for s in samples if len(s) > 2]
    names = _symbolize({a for s in stacks for a in s}, maps, lib_match)
    self_c, incl_c = collections.Counter(), collections.Counter()
    for s in stacks:
        fr = [names.get(a, "?") for a in s]
        self_c[fr[0]] += 1
        for nm in set(fr):
            incl_c[nm] += 1
    total = max(len(stacks), 1)
    # The kernel's CPU-time timers tick more coarsely than hz asks: a
    # sample stands for its share of the process's measured CPU time.
    ms = cpu_ms / total
    out = [f"host profile: {got} samples over {n} runs, {cpu_ms:.3f} CPU ms "
           f"per run (all threads)"]
    out.append("  self (where the samples stopped):")
    for nm, c in self_c.most_common(top):
        out.append(f"    {100.0 * c / total:5.1f} %  {c * ms:7.3f} ms/run  {nm[:100]}")
    out.append("  inclusive (on the stack):")
    for nm, c in incl_c.most_common(top):
        out.append(f"    {100.0 * c / total:5.1f} %  {c * ms:7.3f} ms/run  {nm[:100]}")
    return out
