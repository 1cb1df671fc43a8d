#!/usr/bin/env python3
"""Merge several scripts/jax_suite.py runs into one table.

A full run of jax's suite on 2 cores is split over several runner processes
(different file lists, sometimes a file re-run after an environment fix).
Each runner leaves a work directory with one `<file>.events` per test file
and its stdout (the `file: N passed, ... (Ts) [STATUS]` lines). This script
reads them in the order given; a later directory's result for a file
replaces an earlier one. It prints the per-file table (markdown with --md),
the totals, the pass rate of executed tests, the failures grouped by cause,
and the difference against tests/jax_suite/known_failures.txt.

Usage:
  python3 scripts/jax_suite_merge.py DIR[:STDOUT] [DIR[:STDOUT] ...] [--md]
      [--known FILE] [--write-failures FILE]
"""
import argparse
import collections
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jax_suite  # noqa: E402  (parse_events, read_known, cause_key)

_LINE = re.compile(r"^(?P<file>\S+_test\.py): (?P<p>\d+) passed, (?P<f>\d+) "
                   r"failed, (?P<s>\d+) skipped \((?P<t>\d+)s\)(?P<rest>.*)$")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", help="workdir[:runner stdout file]")
    ap.add_argument("--md", action="store_true", help="markdown table")
    ap.add_argument("--known", default=jax_suite.KNOWN_DEFAULT)
    ap.add_argument("--write-failures", default="",
                    help="write 'test id  # message' lines here")
    a = ap.parse_args()

    per_file = {}  # file -> (results, seconds, status)
    for spec in a.runs:
        wd, _, out = spec.partition(":")
        meta = {}
        if out and os.path.exists(out):
            for line in open(out, errors="replace"):
                m = _LINE.match(line.strip())
                if m:
                    meta[m["file"]] = (int(m["t"]), m["rest"].strip())
        for ev in sorted(glob.glob(os.path.join(wd, "*.events"))):
            name = os.path.basename(ev)[:-len(".events")] + ".py"
            results, last = jax_suite.parse_events(ev)
            secs, status = meta.get(name, (0, ""))
            if name not in meta and not out:
                status = ""
            elif name not in meta:
                # The runner was stopped while this file ran: incomplete.
                status = "[stopped]"
            if last and last not in results and status:
                results[last] = ("timeout", f"{status} while this test ran")
            per_file[name] = (results, secs, status)
        # Files that never produced events (collection errors): the stdout
        # line still counts them.
        for name, (secs, status) in meta.items():
            if not os.path.exists(os.path.join(wd, name[:-3] + ".events")):
                per_file.setdefault(name, ({}, secs, status))

    tot = collections.Counter()
    rows = []
    failures = {}
    for name in sorted(per_file):
        results, secs, status = per_file[name]
        c = collections.Counter()
        for tid, (outcome, msg) in results.items():
            if outcome in ("passed", "xpass"):
                c["passed"] += 1
            elif outcome in ("skipped", "xfailed"):
                c["skipped"] += 1
            elif outcome == "timeout":
                c["cut"] += 1
            else:
                c["failed"] += 1
                failures[tid] = msg
        tot.update(c)
        tot["seconds"] += secs
        rows.append((name, c["passed"], c["failed"], c["skipped"], secs,
                     status))

    if a.md:
        print("| file | passed | failed | skipped | time |")
        print("|---|---:|---:|---:|---:|")
        for name, p, f, s, t, st in rows:
            print(f"| {name} | {p} | {f} | {s} | {t} s{(' ' + st) if st else ''} |")
        print(f"| **total ({len(rows)} files)** | **{tot['passed']}** | "
              f"**{tot['failed']}** | **{tot['skipped']}** | "
              f"**{tot['seconds']} s** |")
    else:
        for name, p, f, s, t, st in rows:
            print(f"{name}: {p} passed, {f} failed, {s} skipped ({t}s) {st}")
    executed = tot["passed"] + tot["failed"]
    rate = 100.0 * tot["passed"] / executed if executed else 0.0
    print(f"\n{len(rows)} files: {tot['passed']} passed, {tot['failed']} "
          f"failed, {tot['skipped']} skipped, {tot['cut']} cut off by a "
          f"timeout; {tot['seconds']} s")
    print(f"pass rate of executed tests: {rate:.2f}%")

    causes = collections.Counter(jax_suite.cause_key(m or "")
                                 for m in failures.values())
    print("\ntop failure causes:")
    for msg, n in causes.most_common(40):
        print(f"  {n:5d}  {msg[:200]}")

    known = jax_suite.read_known(a.known)
    ran = {t.split("::")[0] for r in per_file.values() for t in r[0]}
    new = sorted(set(failures) - known)
    fixed = sorted(t for t in known if t.split("::")[0] in ran
                   and t not in failures)
    print(f"\nvs known failures: {len(new)} new, {len(fixed)} no longer failing")
    if a.write_failures:
        with open(a.write_failures, "w") as f:
            for t in sorted(failures):
                f.write(f"{t}  # {(failures[t] or '')[:160]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
