#!/usr/bin/env python3
"""Run jax's own test suite against the iron PJRT plugin, file by file.

jax's tests live in a jax source checkout at the tag matching the installed
jax (e.g. jax-v0.10.2), outside this repository; we never copy them in.
Each test file runs in its own pytest process (a crash or hang in one file
cannot take the others down) with JAX_PLATFORMS=iron,cpu, so the tests run on
iron and CPU stays available for reference computations. Files run one after
another: the machine has 2 cores.

Per-test outcomes come from pytest's junit XML; if a file hits its timeout
pytest never writes that XML, so the streamed `-v` lines are parsed instead
and the test running when the timeout fired is recorded as TIMEOUT.

Output: per file `file: N passed, N failed, N skipped (Ts)`, the total line,
then the difference against tests/jax_suite/known_failures.txt (one test id a
line, `#` comments). Exit status 1 when there are failures not listed there.

Usage:
  IRON_PLUGIN_PATH=build-x/libiron_pjrt.so PYTHONPATH=python \\
    python3 scripts/jax_suite.py --jax-src /tmp/jax-src [--all | --files a,b]
"""

import argparse
import collections
import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KNOWN_DEFAULT = os.path.join(ROOT, "tests", "jax_suite", "known_failures.txt")

# A representative subset: core API, numpy surface, lax ops, control flow,
# random, nn, dtype/x64 plumbing. Fits a few tens of minutes on 2 cores with
# a small JAX_NUM_GENERATED_CASES.
DEFAULT_FILES = [
    "x64_context_test.py",
    "nn_test.py",
    "random_test.py",
    "lax_control_flow_test.py",
    "lax_test.py",
    "lax_numpy_test.py",
    "api_test.py",
]

# `-v` progress lines: "tests/x_test.py::Cls::test_name PASSED   [ 12%]".
# A parametrised id may contain spaces inside [...]; the outcome word is the
# last upper-case word before the optional percentage.
_V_LINE = re.compile(
    r"^(?P<id>tests/\S+?::.+?) (?P<out>PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)"
    r"(?: .*)?$")
_V_START = re.compile(r"^(?P<id>tests/\S+?::.+?)\s*$")


# --- pytest plugin side -----------------------------------------------------
# Each pytest process loads this module as a plugin (`-p jax_suite`) and
# appends one JSON line per test phase to $JAX_SUITE_EVENTS as it happens, so
# outcomes and failure messages survive a file that is killed at its timeout
# (pytest writes junit XML only at the very end).

def _event(obj):
    path = os.environ.get("JAX_SUITE_EVENTS")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps(obj) + "\n")


def pytest_runtest_logstart(nodeid, location):
    _event({"start": nodeid})


def pytest_collection_modifyitems(session, config, items):
    """JAX_SUITE_SHARD=i/k keeps every k-th collected test starting at i, so
    one large file can run as k processes side by side."""
    shard = os.environ.get("JAX_SUITE_SHARD")
    if not shard:
        return
    i, k = (int(x) for x in shard.split("/"))
    keep = [t for n, t in enumerate(items) if n % k == i]
    drop = [t for n, t in enumerate(items) if n % k != i]
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_runtest_logreport(report):
    if report.when != "call" and report.passed:
        return
    msg = ""
    if report.failed:
        crash = getattr(report.longrepr, "reprcrash", None)
        msg = crash.message if crash is not None else str(report.longrepr)
    elif report.skipped:
        lr = report.longrepr
        msg = lr[2] if isinstance(lr, tuple) and len(lr) == 3 else str(lr)
    if hasattr(report, "wasxfail"):
        outcome = "xfailed" if report.skipped else "xpass"
    elif report.failed:
        outcome = "failed" if report.when == "call" else "error"
    else:
        outcome = report.outcome
    _event({"id": report.nodeid, "when": report.when, "outcome": outcome,
            "msg": _summary(msg)})


def _summary(text):
    """First line of a message; a bare 'AssertionError:' head takes the next
    lines too, since numerical mismatches say what differs there."""
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    out = lines[:1]
    for l in lines[1:4]:
        if len(" | ".join(out)) >= 80:
            break
        out.append(l)
    return " | ".join(out)[:400]


def parse_events(path):
    """Returns ({test_id: (outcome, message)}, last_started_id)."""
    out = {}
    last_started = None
    rank = {"passed": 0, "xpass": 0, "skipped": 1, "xfailed": 1,
            "failed": 2, "error": 3}
    with open(path, errors="replace") as f:
        for line in f:
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line cut by the kill at timeout
            if "start" in ev:
                last_started = ev["start"]
                continue
            tid = ev["id"]
            prev = out.get(tid)
            if prev is None or rank[ev["outcome"]] > rank[prev[0]]:
                out[tid] = (ev["outcome"], ev["msg"])
            if tid == last_started and ev["when"] == "teardown":
                last_started = None
    return out, last_started


# --- runner side ---------------------------------------------------------------

def parse_args():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jax-src", default="/tmp/jax-src",
                   help="jax source checkout (holds tests/ and pyproject.toml)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--all", action="store_true", help="every tests/*_test.py")
    g.add_argument("--files", default="",
                   help="comma-separated test files (names under tests/)")
    p.add_argument("--exclude", default="",
                   help="comma-separated files to leave out (with --all)")
    p.add_argument("--jobs", type=int, default=1,
                   help="pytest processes at once (default 1; the GPU machine "
                        "takes 16)")
    p.add_argument("--shard", action="append", default=[],
                   metavar="FILE:K",
                   help="run FILE as K processes, each with every K-th test "
                        "(repeatable), e.g. lax_numpy_test.py:4")
    p.add_argument("--timeout", type=float, default=600,
                   help="per-file timeout in seconds (default 600)")
    p.add_argument("--deadline", type=float, default=0,
                   help="whole-run limit in seconds (0: none): a file still "
                   "running then is cut off like a timeout, a file not started "
                   "by then is reported as not run, and the results are "
                   "written before an outer limit (the GPU machine's 10 "
                   "minutes) can kill the run")
    p.add_argument("--cases", type=int, default=3,
                   help="JAX_NUM_GENERATED_CASES (default 3)")
    p.add_argument("-k", dest="keyword", default="",
                   help="pytest -k expression applied to every file")
    p.add_argument("--platforms", default="iron,cpu",
                   help="JAX_PLATFORMS for the run (default iron,cpu)")
    p.add_argument("--known", default=KNOWN_DEFAULT,
                   help="known-failures list to diff against")
    p.add_argument("--rerun-on-cpu", action="store_true",
                   help="rerun each failure with JAX_PLATFORMS=cpu to classify "
                        "'also fails on cpu'")
    p.add_argument("--json", default="",
                   help="write every outcome and failure message here")
    p.add_argument("--workdir", default="/tmp/jax_suite_out",
                   help="where per-file junit XML and logs go")
    p.add_argument("--write-known", default="",
                   help="write the current failures as a known-failures file")
    return p.parse_args()


def list_files(args):
    tests_dir = os.path.join(args.jax_src, "tests")
    if not os.path.isdir(tests_dir):
        sys.exit(f"jax_suite: no tests/ under {args.jax_src}; check out jax's "
                 "source at the tag matching the installed jax there")
    if args.all:
        files = sorted(f for f in os.listdir(tests_dir) if f.endswith("_test.py"))
    elif args.files:
        files = [f.strip() for f in args.files.split(",") if f.strip()]
    else:
        files = list(DEFAULT_FILES)
    excl = {f.strip() for f in args.exclude.split(",") if f.strip()}
    files = [f if f.endswith(".py") else f + ".py" for f in files]
    files = [f[len("tests/"):] if f.startswith("tests/") else f for f in files]
    return [f for f in files if f not in excl]


def suite_env(args, platforms):
    env = dict(os.environ)
    env["JAX_PLATFORMS"] = platforms
    env["JAX_NUM_GENERATED_CASES"] = str(args.cases)
    # Keep each pytest process to the machine's cores and out of our repo.
    env.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    return env


def first_line(text):
    for line in (text or "").splitlines():
        line = line.strip()
        if line:
            return line[:400]
    return ""


def parse_junit(path):
    """Returns {test_id: (outcome, message)} from pytest's junit XML."""
    out = {}
    tree = ET.parse(path)
    for tc in tree.iter("testcase"):
        cls = tc.get("classname", "")
        name = tc.get("name", "")
        # pytest's classname is "tests.api_test.APITest" (dotted path + class)
        # under importlib mode; rebuild the node id the -v output prints.
        parts = cls.split(".")
        mod_idx = max((i for i, p in enumerate(parts) if p.endswith("_test")),
                      default=len(parts) - 1)
        path_part = "/".join(parts[:mod_idx + 1]) + ".py"
        if not path_part.startswith("tests/"):
            path_part = "tests/" + path_part.split("tests/", 1)[-1]
        node = "::".join([path_part] + parts[mod_idx + 1:] + [name])
        outcome, msg = "passed", ""
        for child in tc:
            if child.tag == "failure":
                outcome, msg = "failed", child.get("message") or first_line(child.text)
            elif child.tag == "error":
                outcome, msg = "error", child.get("message") or first_line(child.text)
            elif child.tag == "skipped":
                typ = child.get("type", "")
                outcome = "xfailed" if "xfail" in typ else "skipped"
                msg = child.get("message", "")
        out[node] = (outcome, msg)
    return out


def parse_verbose(text):
    """Returns ({test_id: (outcome, "")}, last_started_id) from -v output."""
    out = {}
    last_started = None
    for line in text.splitlines():
        m = _V_LINE.match(line)
        if m:
            out[m.group("id").strip()] = (m.group("out").lower(), "")
            last_started = None
            continue
        m = _V_START.match(line)
        if m:
            last_started = m.group("id")
    return out, last_started


def run_pytest(args, jax_src, targets, platforms, tag, shard=None,
               timeout=None):
    """Runs one pytest process; returns (results, seconds, status_str).
    `shard` "i/k": only every k-th test of the targets (JAX_SUITE_SHARD).
    `timeout` overrides args.timeout (the run's deadline is nearer)."""
    os.makedirs(args.workdir, exist_ok=True)
    xml = os.path.join(args.workdir, tag + ".xml")
    log = os.path.join(args.workdir, tag + ".log")
    events = os.path.join(args.workdir, tag + ".events")
    for stale in (xml, events):
        if os.path.exists(stale):
            os.remove(stale)
    cmd = [sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
           "-p", "jax_suite",
           "--junitxml", xml, "-o", "junit_family=xunit1",
           "--tb=short", "--no-header"]
    if args.keyword:
        cmd += ["-k", args.keyword]
    cmd += targets
    t0 = time.time()
    status = "ok"
    with open(log, "w") as logf:
        # Own process group, so a timeout kills pytest and anything it forked.
        env = suite_env(args, platforms)
        env["JAX_SUITE_EVENTS"] = events
        if shard:
            env["JAX_SUITE_SHARD"] = shard
        here = os.path.dirname(os.path.abspath(__file__))
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (here, env.get("PYTHONPATH", "")) if p)
        proc = subprocess.Popen(cmd, cwd=jax_src, env=env,
                                stdout=logf, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout or args.timeout)
            if rc not in (0, 1, 5):  # 5: nothing collected
                status = f"exit {rc}"
            if rc < 0:
                status = f"killed by signal {-rc}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            status = "TIMEOUT"
    dt = time.time() - t0
    with open(log, errors="replace") as f:
        text = f.read()
    last = None
    if os.path.exists(events):
        results, last = parse_events(events)
    elif os.path.exists(xml) and status != "TIMEOUT":
        try:
            results = parse_junit(xml)
        except ET.ParseError:
            results, last = parse_verbose(text)
    else:
        results, last = parse_verbose(text)
    if status != "ok":
        if last and last not in results:
            results[last] = ("timeout" if status == "TIMEOUT" else "crashed",
                             f"{status} while this test ran")
    if not results:
        # Import/collection failure or a crash before any test: keep the tail.
        tail = [l for l in text.splitlines() if l.strip()][-3:]
        results["tests/" + targets[0].split("tests/")[-1].split("::")[0] +
                "::<file>"] = ("error", f"{status}: " + " | ".join(tail)[:400])
    return results, dt, status


def read_known(path):
    known = set()
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    known.add(line)
    return known


_COMPILE_CTX = re.compile(
    r"while compiling \S+: |in function [^:(]*(?:\(called at [^)]*\))?: ")

_SRC_LOC = re.compile(r"\s*\([\w./-]+\.py:\d+\)")

_NORM = [
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"\b\d+(\.\d+)?(e[-+]?\d+)?\b"), "N"),
    (re.compile(r"\s+"), " "),
]


def cause_key(msg):
    """Collapses a failure message to a groupable cause."""
    m = first_line(msg)
    # Compile errors name the jitted function and the call chain down to the
    # op; the op and reason after them is the cause, the chain is per test.
    m = _COMPILE_CTX.sub("", m)
    m = _SRC_LOC.sub("", m)
    # Mismatch reports carry array dumps after the first line; keep the head.
    m = m.split("Mismatched elements")[0].split("Max absolute difference")[0]
    for rx, rep in _NORM:
        m = rx.sub(rep, m)
    return m[:160].strip()


def main():
    args = parse_args()
    files = list_files(args)
    jax_src = os.path.abspath(args.jax_src)
    all_results = {}
    file_stats = []
    t_total = time.time()
    print(f"jax_suite: {len(files)} files, JAX_PLATFORMS={args.platforms}, "
          f"JAX_NUM_GENERATED_CASES={args.cases}, timeout {args.timeout:.0f}s/file",
          flush=True)
    shards = {}
    for spec in args.shard:
        name, _, k = spec.rpartition(":")
        name = name if name.endswith(".py") else name + ".py"
        shards[name] = max(1, int(k))
    units = []  # (file, tag, shard)
    for f in files:
        k = shards.get(f, 1)
        for i in range(k):
            units.append((f, f[:-3] if k == 1 else f"{f[:-3]}.{i}of{k}",
                          None if k == 1 else f"{i}/{k}"))

    not_run = []

    def run_unit(unit):
        f, tag, shard = unit
        timeout = None
        if args.deadline:
            left = args.deadline - (time.time() - t_total)
            if left < 20:
                not_run.append(tag)
                return unit, ({}, 0.0, "not run (deadline)")
            timeout = min(args.timeout, left)
        return unit, run_pytest(args, jax_src, ["tests/" + f], args.platforms,
                                tag, shard, timeout)

    per_file = collections.OrderedDict((f, []) for f in files)
    with concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool:
        for (f, tag, shard), (res, dt, status) in pool.map(run_unit, units):
            per_file[f].append((res, dt, status))
            if len(per_file[f]) < shards.get(f, 1):
                continue
            res = {}
            for r, _, _ in per_file[f]:
                res.update(r)
            dt = max(d for _, d, _ in per_file[f])
            bad = [st for _, _, st in per_file[f] if st != "ok"]
            status = bad[0] if bad else "ok"
            c = collections.Counter(o for o, _ in res.values())
            failed = c["failed"] + c["error"] + c["crashed"]
            extra = "" if status == "ok" else f" [{status}]"
            print(f"{f}: {c['passed']} passed, {failed} failed, "
                  f"{c['skipped'] + c['xfailed']} skipped ({dt:.0f}s){extra}",
                  flush=True)
            file_stats.append({"file": f, "passed": c["passed"],
                               "failed": failed,
                               "skipped": c["skipped"] + c["xfailed"],
                               "seconds": round(dt, 1), "status": status})
            all_results.update(res)

    # A test still running when its file hit the timeout did not fail; it is
    # reported as cut off and left out of the pass rate.
    failures = {t: m for t, (o, m) in all_results.items()
                if o in ("failed", "error", "crashed")}
    cut_off = sorted(t for t, (o, _) in all_results.items() if o == "timeout")
    passed = sum(1 for o, _ in all_results.values() if o in ("passed", "xpass"))
    skipped = sum(1 for o, _ in all_results.values() if o in ("skipped", "xfailed"))

    also_cpu = {}
    if args.rerun_on_cpu and failures:
        by_file = collections.defaultdict(list)
        for t in failures:
            if not t.endswith("::<file>"):
                by_file[t.split("::")[0]].append(t)
        for path, ids in sorted(by_file.items()):
            for i in range(0, len(ids), 200):
                chunk = ids[i:i + 200]
                res, _, _ = run_pytest(args, jax_src, chunk, "cpu",
                                       os.path.basename(path)[:-3] + f"_cpu{i}")
                for t in chunk:
                    o = res.get(t, ("missing", ""))[0]
                    also_cpu[t] = o in ("failed", "error", "crashed")

    dt_total = time.time() - t_total
    print()
    print(f"{passed} passed, {len(failures)} failed, {skipped} skipped "
          f"({dt_total:.0f}s)")
    timed_out = [s["file"] for s in file_stats if s["status"] == "TIMEOUT"]
    if timed_out:
        print(f"files cut off by the {args.timeout:.0f}s timeout (partial "
              f"results): {', '.join(timed_out)}")
        for t in cut_off:
            print(f"  running at the timeout: {t}")
    if not_run:
        print(f"not run (the {args.deadline:.0f}s deadline came first): "
              f"{', '.join(sorted(not_run))}")
    executed = passed + len(failures)
    if executed:
        print(f"pass rate of executed tests: {100.0 * passed / executed:.2f}%")

    causes = collections.Counter(cause_key(m) for m in failures.values())
    examples = collections.defaultdict(list)
    for t, m in sorted(failures.items()):
        k = cause_key(m)
        if len(examples[k]) < 3:
            examples[k].append(t)
    if causes:
        print("\ntop failure causes:")
        for k, n in causes.most_common(25):
            cpu = ""
            if also_cpu:
                ts = [t for t, m in failures.items() if cause_key(m) == k]
                ncpu = sum(1 for t in ts if also_cpu.get(t))
                cpu = f" (also on cpu: {ncpu}/{len(ts)})"
            print(f"  {n:5d}  {k or '(no message)'}{cpu}")
            for e in examples[k]:
                print(f"         e.g. {e}")

    # Skips show how jax's device checks treat iron (an unknown platform to
    # them: device_under_test() is "iron", so skip_on_devices("cpu") runs the
    # test and run_on_devices("cpu") skips it).
    skips = collections.Counter(cause_key(m) for o, m in all_results.values()
                                if o in ("skipped", "xfailed"))
    if skips:
        print("\ntop skip reasons:")
        for k, n in skips.most_common(10):
            print(f"  {n:5d}  {k or '(no message)'}")

    ran_files = {"tests/" + f for f in files}
    known = read_known(args.known)
    known_here = {t for t in known if t.split("::")[0] in ran_files}
    new = sorted(set(failures) - known)
    fixed = sorted(t for t in known_here
                   if all_results.get(t, ("", ""))[0] in ("passed", "xpass"))
    print(f"\nvs {os.path.relpath(args.known, ROOT) if args.known.startswith(ROOT) else args.known}: "
          f"{len(new)} new failures, {len(fixed)} fixed")
    for t in new[:50]:
        print(f"  NEW   {t}")
    if len(new) > 50:
        print(f"  ... and {len(new) - 50} more new failures")
    for t in fixed:
        print(f"  FIXED {t}")

    if args.write_known:
        with open(args.write_known, "w") as f:
            f.write("# jax test-suite failures on iron (scripts/jax_suite.py)\n")
            for t in sorted(failures):
                tail = "  # also fails on cpu" if also_cpu.get(t) else ""
                f.write(t + tail + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"files": file_stats,
                       "cases": args.cases, "platforms": args.platforms,
                       "results": {t: list(v) for t, v in all_results.items()},
                       "also_fails_on_cpu": also_cpu}, f, indent=1)
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
