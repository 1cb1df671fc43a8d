#!/usr/bin/env python3
"""Compares two IRON_PLAN_FUZZ_LOG files of tests/c/test_plan_fuzz (two
builds, same cases) op by op: the host's statuses must not change; a CUDA
status may only change to the host's (or stay); where CUDA accepted the op
in both builds, the CUDA sources it generated must be the same bytes.

usage: plan_fuzz_compare.py BEFORE AFTER [--show N] [--ignore-sources]

--ignore-sources: for a change that rewrites the generated text on purpose
(a new prelude, say), sources that differ are counted, not failures.
"""
import collections
import re
import sys

LINE = re.compile(r"^(\S+) (\d+) H (\S+) ?(.*?) \| C (\S+) ?(.*?) \| src (\d+) (\S+)$")


def parse(path):
    out = {}
    with open(path) as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if not m:
                raise SystemExit(f"{path}: cannot parse: {line!r}")
            fam, i, hc, hm, cc, cm, n, h = m.groups()
            out[(fam, int(i))] = ((hc, hm), (cc, cm), (n, h))
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "--ignore-sources"]
    ignore_sources = len(args) != len(sys.argv) - 1
    before, after = parse(args[0]), parse(args[1])
    show = int(args[3]) if len(args) > 3 and args[2] == "--show" else 3
    if before.keys() != after.keys():
        raise SystemExit("the logs hold different cases")
    kinds = collections.Counter()
    bad = collections.Counter()
    shown = collections.Counter()
    for key in sorted(before):
        (bh, bc, bs), (ah, ac, as_) = before[key], after[key]
        fam = key[0]
        why = None
        if bh != ah:
            why = "host status changed"
        elif bc != ac:
            kinds[(fam, "cuda now the host's" if ac == ah else
                   "cuda changed, another refusal")] += 1
            if ac != ah and ac[0] != "UNIMPLEMENTED":
                why = "cuda status changed to neither the host's nor a refusal"
            elif ac[0] == "OK" and bc[0] != "OK":
                why = "cuda now accepts"
        elif ac[0] == "OK" and bs != as_:
            if ignore_sources:
                kinds[(fam, "same, cuda sources changed")] += 1
            else:
                why = "cuda sources changed"
        else:
            kinds[(fam, "same")] += 1
        if why:
            bad[(fam, why)] += 1
            if shown[(fam, why)] < show:
                shown[(fam, why)] += 1
                print(f"{fam} #{key[1]}: {why}\n  before: H {bh} C {bc} {bs}\n"
                      f"  after:  H {ah} C {ac} {as_}")
    for (fam, k), n in sorted(kinds.items()):
        print(f"{fam:22} {k:32} {n}")
    for (fam, k), n in sorted(bad.items()):
        print(f"BAD {fam:22} {k:32} {n}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
