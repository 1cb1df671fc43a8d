"""iron-dump (our reader + printer) against jaxlib's own reading of the same
artifacts.

For every tests/data/corpus/NAME.mlirbc, NAME.ref.txt is what jaxlib's
StableHLO deserializer makes of the artifact, printed in MLIR's generic form
(tests/gen_corpus.py). iron-dump prints the iron IR in the same generic
shape. Both texts are parsed with regexes into a stream of events (function
headers, block arguments, ops) and compared op by op, in order: op names,
operand wiring (which definition each operand refers to), operand and
result types, and the key attributes that keep their names between VHLO and
StableHLO (dimensions, comparison direction, callee, small constants ...).

Normalizations, each for a reason:
- builtin.unrealized_conversion_cast: jaxlib folds these away when it
  converts back from VHLO; ours are dropped and their result aliased to
  their operand.
- module-level ops other than functions (sdy.mesh) are not part of the iron
  IR's function list.
- integer lists: `array<i64: 1, 2>` (StableHLO) == `dense<[1, 2]> :
  tensor<2xi64>` (VHLO tensors in our IR).

The tool is found through $IRON_DUMP_TOOL or the newest build*/iron-dump.
"""
import glob
import math
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
CORPUS = os.path.join(ROOT, "tests", "data", "corpus")

KEY_ATTRS = {
    "comparison_direction", "compare_type", "broadcast_dimensions",
    "dimensions", "permutation", "iota_dimension", "dimension",
    "start_indices", "limit_indices", "strides", "slice_sizes",
    "edge_padding_low", "edge_padding_high", "interior_padding", "callee",
    "name", "decomposition", "is_stable", "value", "call_target_name",
    "index", "fft_type", "rng_algorithm", "window_dimensions",
    "window_strides", "exponent_bits", "mantissa_bits", "version",
    "has_side_effect", "api_version", "precision_config",
    # Fields of StableHLO's #stablehlo.dot/gather/scatter structs, which
    # VHLO (and our IR) keep as separate attributes.
    "lhs_batching_dimensions", "rhs_batching_dimensions",
    "lhs_contracting_dimensions", "rhs_contracting_dimensions",
    "offset_dims", "collapsed_slice_dims", "operand_batching_dims",
    "start_indices_batching_dims", "start_index_map", "index_vector_dim",
    "update_window_dims", "inserted_window_dims", "input_batching_dims",
    "scatter_indices_batching_dims", "scatter_dims_to_operand_dims",
}
STRUCT_RE = re.compile(r"^#stablehlo\.(dot|gather|scatter)<(.*)>$")


def expand_structs(attrs):
    """Flattens #stablehlo.dot<...> (and gather/scatter) into their fields,
    the form VHLO stores them in."""
    out = dict(attrs)
    for k, v in attrs.items():
        m = STRUCT_RE.match(v.strip())
        if not m:
            continue
        for item in split_top(m.group(2)):
            if " = " in item:
                n, val = item.split(" = ", 1)
                out[n.strip()] = val.strip()
    return out


def find_tool():
    env = os.environ.get("IRON_DUMP_TOOL")
    if env:
        return env
    cands = [p for p in glob.glob(os.path.join(ROOT, "build*", "iron-dump"))
             if os.access(p, os.X_OK)]
    if not cands:
        return None
    return max(cands, key=os.path.getmtime)


# ---------------------------------------------------------------------------
# Text helpers

def split_top(s, sep=","):
    """Splits at `sep` outside (), <>, [], {} and string literals."""
    out, depth, cur, in_str, i = [], 0, [], False, 0
    while i < len(s):
        ch = s[i]
        if in_str:
            cur.append(ch)
            if ch == "\\" and i + 1 < len(s):
                cur.append(s[i + 1])
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            cur.append(ch)
        elif ch in "(<[{":
            depth += 1
            cur.append(ch)
        elif ch in ")>]}":
            # "->" is not a closing bracket.
            if ch == ">" and i > 0 and s[i - 1] == "-":
                cur.append(ch)
            else:
                depth -= 1
                cur.append(ch)
        elif ch == sep and depth == 0:
            out.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
        i += 1
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return out


def matching(s, start):
    """Index of the bracket closing the one at s[start]."""
    pairs = {"(": ")", "<": ">", "[": "]", "{": "}"}
    stack, in_str, i = [], False, start
    while i < len(s):
        ch = s[i]
        if in_str:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in pairs:
            stack.append(pairs[ch])
        elif ch in ")>]}":
            if ch == ">" and s[i - 1] == "-":
                pass
            else:
                if not stack or stack[-1] != ch:
                    return -1
                stack.pop()
                if not stack:
                    return i
        i += 1
    return -1


def parse_signature(rest):
    """' : (A, B) -> C' at the end of `rest`: (operand types, result types,
    text before the signature)."""
    k = rest.rfind(") -> ")
    while k >= 0:
        # Find the "(" that opens this operand list and is preceded by " : ".
        depth, j = 0, k
        while j >= 0:
            if rest[j] == ")" and not (j > 0 and rest[j - 1] == "-"):
                depth += 1
            elif rest[j] == "(":
                depth -= 1
                if depth == 0:
                    break
            j -= 1
        if j >= 3 and rest[j - 3:j] == " : ":
            ins = split_top(rest[j + 1:k])
            outs = rest[k + 5:].strip()
            if outs.startswith("(") and matching(outs, 0) == len(outs) - 1:
                outs = split_top(outs[1:-1])
            else:
                outs = [outs] if outs else []
            return ins, outs, rest[:j - 3]
        k = rest.rfind(") -> ", 0, k)
    return None, None, rest


def attr_blocks(text):
    """name -> value for every `<{...}>` / `{...}` dictionary in text."""
    attrs = {}
    i = 0
    while i < len(text):
        if text.startswith("<{", i):
            j = matching(text, i + 1)
            body = text[i + 2:j]
            i = j + 2
        elif text[i] == "{":
            j = matching(text, i)
            body = text[i + 1:j]
            i = j + 1
        else:
            i += 1
            continue
        if j < 0:
            break
        for item in split_top(body):
            if " = " in item:
                n, v = item.split(" = ", 1)
                attrs[n.strip()] = v.strip()
            else:
                attrs[item.strip()] = "unit"
    return attrs


# ---------------------------------------------------------------------------
# Parsing both texts into events

OP_RE = re.compile(r'^\s*(?:(?P<res>%[^=]*?)\s*=\s*)?"(?P<name>[\w.\-]+)"\(')
BLOCK_RE = re.compile(r"^\s*\^bb\d+(?:\((?P<args>.*)\))?:\s*$")
FUNC_RE = re.compile(r"^\s*func\.func (?P<vis>public|private) @(?P<name>[^(]+)\(")


def expand_results(res):
    if not res:
        return []
    names = []
    for r in split_top(res):
        m = re.match(r"^(%[\w.$-]+)(?::(\d+))?$", r.strip())
        if not m:
            continue
        if m.group(2):
            names += [f"{m.group(1)}#{i}" for i in range(int(m.group(2)))]
        else:
            names.append(m.group(1))
    return names


def parse_block_args(args):
    names, types = [], []
    for a in split_top(args or ""):
        if ":" not in a:
            continue
        n, t = a.split(":", 1)
        t = t.strip()
        # Drop a trailing loc(...) or attribute dict.
        t = re.sub(r"\s+loc\(.*\)$", "", t)
        names.append(n.strip())
        types.append(t)
    return names, types


def parse_text(text, ours):
    """Events: ('func', name), ('args', names, types),
    ('op', name, results, operands, in_types, out_types, attrs)."""
    events = []
    stack = []  # open region ops: (event index, attr text so far)
    lines = text.splitlines()
    for line in lines:
        if ours:
            m = FUNC_RE.match(line)
            if m:
                events.append(("func", m.group("name")))
                k = line.index("(")
                j = matching(line, k)
                names, types = parse_block_args(line[k + 1:j])
                # Strip "{attrs}" after types.
                types = [re.sub(r"\s*\{.*\}$", "", t) for t in types]
                if names:  # jaxlib prints no ^bb0 line for no arguments
                    events.append(("args", names, types))
                continue
        m = BLOCK_RE.match(line)
        if m:
            names, types = parse_block_args(m.group("args"))
            events.append(("args", names, types))
            continue
        stripped = line.strip()
        if stripped.startswith("})") or stripped.startswith("}, {"):
            if stripped.startswith("})") and stack:
                idx = stack.pop()
                if idx is None:
                    continue
                rest = stripped[2:]
                ins, outs, before = parse_signature(rest)
                ev = events[idx]
                attrs = dict(ev[6])
                attrs.update(attr_blocks(before))
                events[idx] = ev[:4] + (ins or [], outs or [], attrs)
            continue
        m = OP_RE.match(line)
        if not m:
            continue
        name = m.group("name")
        k = line.index('"' + name + '"(') + len(name) + 2
        j = matching(line, k)
        operands = split_top(line[k + 1:j])
        rest = line[j + 1:]
        results = expand_results(m.group("res"))
        if name in ("builtin.module", "func.func"):
            if name == "func.func":
                props = attr_blocks(rest)
                events.append(("func", props.get("sym_name", "").strip('"')))
            if rest.rstrip().endswith("({"):
                stack.append(None)
            continue
        if rest.rstrip().endswith("({"):
            before = rest[:rest.rstrip().rfind("({")]
            events.append(("op", name, results, operands, [], [],
                           attr_blocks(before)))
            stack.append(len(events) - 1)
            continue
        ins, outs, before = parse_signature(rest)
        events.append(("op", name, results, operands, ins or [], outs or [],
                       attr_blocks(before)))
    return events


# ---------------------------------------------------------------------------
# Attribute values

def int_list(v, type_text=None):
    v = v.strip()
    if re.match(r"^\[[-\d, ]*\]$", v):
        return [int(x) for x in re.findall(r"-?\d+", v)]
    m = re.match(r"^(-?\d+)(?:\s*:\s*[su]?i\d+)?$", v)
    if m:
        return [int(m.group(1))]
    m = re.match(r"^array<i\d+(?::\s*(.*))?>$", v)
    if m:
        body = m.group(1)
        return [int(x) for x in body.split(",")] if body else []
    m = re.match(r"^dense<(.*)>\s*:\s*tensor<(.*)>$", v)
    if m and re.search(r"x?i\d+$|^i\d+$", m.group(2)):
        body = m.group(1).strip()
        shape = [int(d) for d in m.group(2).split("x")[:-1] if d.isdigit()]
        n = math.prod(shape) if shape else 1
        nums = re.findall(r"-?\d+", body)
        if not body.startswith("[") and len(nums) == 1:
            return [int(nums[0])] * n
        return [int(x) for x in nums]
    return None


def dense_values(v):
    """(kind, values) of a dense literal, or None when elided/hex."""
    m = re.match(r"^dense<(.*)>\s*:\s*(tensor<.*>)$", v.strip())
    if not m:
        return None
    body, ttext = m.group(1).strip(), m.group(2)
    if body.startswith('"') or "0x" in body:
        return None
    shape_elem = ttext[len("tensor<"):-1]
    parts = shape_elem.split("x")
    dims = []
    for p in parts:
        if p.isdigit():
            dims.append(int(p))
        else:
            break
    n = math.prod(dims) if dims else 1
    toks = re.findall(r"true|false|[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)",
                      body)
    vals = []
    for t in toks:
        if t == "true":
            vals.append(1.0)
        elif t == "false":
            vals.append(0.0)
        else:
            vals.append(float(t))
    per = 2 if "complex" in shape_elem else 1
    if len(vals) == per and n != 1:
        vals = vals * n
    return vals


def values_equal(a, b):
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if math.isnan(x) and math.isnan(y):
            continue
        if x != y and abs(x - y) > 1e-5 * max(abs(x), abs(y)):
            return False
    return True


def attr_equal(name, ref, ours):
    ref, ours = ref.strip(), ours.strip()
    if ref == ours:
        return True
    a, b = int_list(ref), int_list(ours)
    if a is not None and b is not None:
        return a == b
    if name == "value":
        a, b = dense_values(ref), dense_values(ours)
        if a is None or b is None:
            return True  # elided or hex on one side: nothing to compare
        return values_equal(a, b)
    # Integer scalars: "1 : i64" vs "1 : i64"; booleans; enums; symbols.
    norm = lambda s: re.sub(r"\s+", " ", s)
    if norm(ref) == norm(ours):
        return True
    # Dictionaries (composite_attributes) compare as text modulo spacing.
    return False


def norm_type(t):
    t = re.sub(r"\s+", "", t)
    return t


# ---------------------------------------------------------------------------
# The comparison

def compare(ref_text, our_text):
    """Returns a list of mismatch descriptions (empty: equal)."""
    # Module-level ops are not in the iron IR's function list.
    ref = [e for e in parse_text(ref_text, ours=False)
           if not (e[0] == "op" and e[1] == "sdy.mesh")]
    ours = [e for e in parse_text(our_text, ours=True)]
    # Our casts are identities: alias result to operand and drop them.
    alias = {}
    filtered = []
    for e in ours:
        if e[0] == "op" and e[1] == "builtin.unrealized_conversion_cast":
            for r, o in zip(e[2], e[3]):
                alias[r] = alias.get(o, o)
            continue
        if e[0] == "op":
            e = e[:3] + ([alias.get(o, o) for o in e[3]],) + e[4:]
        filtered.append(e)
    ours = filtered
    problems = []
    if len(ref) != len(ours):
        problems.append(f"{len(ref)} reference events vs {len(ours)} ours")
    mapping = {}
    for i, (r, o) in enumerate(zip(ref, ours)):
        where = f"event {i}"
        if r[0] != o[0]:
            problems.append(f"{where}: {r[0]} vs {o[0]} ({r[1]} / {o[1]})")
            break
        if r[0] == "func":
            if r[1] != o[1]:
                problems.append(f"{where}: function @{r[1]} vs @{o[1]}")
            continue
        if r[0] == "args":
            if [norm_type(t) for t in r[2]] != [norm_type(t) for t in o[2]]:
                problems.append(f"{where}: block argument types {r[2]} vs "
                                f"{o[2]}")
            for a, b in zip(r[1], o[1]):
                mapping[a] = b
            continue
        _, rname, rres, rops, rins, routs, rattrs = r
        _, oname, ores, oops, oins, oouts, oattrs = o
        where = f"{where} ({rname})"
        if rname != oname:
            problems.append(f"{where}: op {rname} vs {oname}")
            break
        if len(rops) != len(oops):
            problems.append(f"{where}: {len(rops)} vs {len(oops)} operands")
        else:
            for a, b in zip(rops, oops):
                if mapping.get(a) != b:
                    problems.append(f"{where}: operand {a} maps to "
                                    f"{mapping.get(a)}, ours is {b}")
        if [norm_type(t) for t in rins] != [norm_type(t) for t in oins]:
            problems.append(f"{where}: operand types {rins} vs {oins}")
        if [norm_type(t) for t in routs] != [norm_type(t) for t in oouts]:
            problems.append(f"{where}: result types {routs} vs {oouts}")
        if len(rres) != len(ores):
            problems.append(f"{where}: {len(rres)} vs {len(ores)} results")
        for a, b in zip(rres, ores):
            mapping[a] = b
        for k, v in expand_structs(rattrs).items():
            if k not in KEY_ATTRS:
                continue
            if k not in oattrs:
                problems.append(f"{where}: attribute {k} missing")
            elif not attr_equal(k, v, oattrs[k]):
                problems.append(f"{where}: attribute {k}: {v} vs {oattrs[k]}")
        if len(problems) > 20:
            break
    return problems


def artifacts():
    if not os.path.isdir(CORPUS):
        return []
    return sorted(p for p in glob.glob(os.path.join(CORPUS, "*.mlirbc"))
                  if os.path.exists(p[:-len(".mlirbc")] + ".ref.txt"))


def dump(tool, path):
    res = subprocess.run([tool, path], capture_output=True, text=True,
                         timeout=60)
    assert res.returncode == 0, f"iron-dump {path}: {res.stderr}"
    return res.stdout


@pytest.fixture(scope="module")
def tool():
    t = find_tool()
    if not t:
        pytest.fail("iron-dump not built: set IRON_DUMP_TOOL or build into "
                    "build*/")
    return t


def test_corpus_present():
    assert len(artifacts()) >= 50


@pytest.mark.parametrize("path", artifacts(),
                         ids=lambda p: os.path.basename(p))
def test_artifact_matches_reference(tool, path):
    ours = dump(tool, path)
    with open(path[:-len(".mlirbc")] + ".ref.txt") as f:
        ref = f.read()
    problems = compare(ref, ours)
    assert not problems, "\n".join(problems[:20])


def test_comparison_can_fail(tool):
    """The comparison notices a wrong op, a wrong attribute and a rewired
    operand."""
    path = os.path.join(CORPUS, "x_top_k.mlirbc")
    ours = dump(tool, path)
    with open(path[:-len(".mlirbc")] + ".ref.txt") as f:
        ref = f.read()
    assert not compare(ref, ours)
    assert compare(ref, ours.replace("stablehlo.iota", "stablehlo.abs"))
    assert compare(ref, ours.replace("comparison_direction GT",
                                     "comparison_direction LT"))
    assert compare(ref, ours.replace("dense<[4, 3]>", "dense<[4, 2]>"))
    assert compare(ref, ours.replace('"stablehlo.slice"(%2)',
                                     '"stablehlo.slice"(%3)'))
    assert compare(ref, ours.replace("tensor<4x3xf32>", "tensor<4x3xf16>"))


def test_bad_input_exit_code(tool, tmp_path):
    bad = tmp_path / "bad.mlirbc"
    bad.write_bytes(b"ML\xefR\x0dStableHLO_v1.16.0\x00\x00\x05")
    res = subprocess.run([tool, str(bad)], capture_output=True, text=True)
    assert res.returncode == 1
    assert "bytecode offset" in res.stderr
