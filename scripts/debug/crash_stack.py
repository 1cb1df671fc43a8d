"""Names the frames of a segv_trace report (tools/segv_trace.c): reads the
report on stdin, prints each native frame as library + function (addr2line
for the shared objects given with -e). Not part of the plugin."""
import re, subprocess, sys, bisect, os
text = sys.stdin.read()
maps = []
for m in re.finditer(r"^([0-9a-f]+)-([0-9a-f]+) r-xp ([0-9a-f]+) \S+ \d+\s+(\S+)$", text, re.M):
    maps.append((int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16), m.group(4)))
maps.sort()
starts = [m[0] for m in maps]
for block in text.split("=== segv_trace: fatal signal, native stack:")[1:]:
    print("--- crash stack")
    for line in block.split("=== segv_trace: executable mappings:")[0].strip().splitlines():
        a = re.search(r"\[0x([0-9a-f]+)\]", line)
        if not a:
            continue
        addr = int(a.group(1), 16)
        i = bisect.bisect_right(starts, addr) - 1
        if i < 0 or addr >= maps[i][1]:
            print("  ?", line.strip()); continue
        lo, _, off, path = maps[i]
        rel = addr - lo + off
        name = line.strip()
        if "iron" in os.path.basename(path):
            r = subprocess.run(["addr2line", "-f", "-i", "-e", path, hex(rel)], capture_output=True, text=True)
            name = " <- ".join(r.stdout.split("\n")[0::2][:3])
        print(f"  {os.path.basename(path)}+{hex(rel)}  {name}")
