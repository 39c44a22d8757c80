#!/usr/bin/env python3
"""Reads the PTX of CUDA kernels and fails if the named ones decode weights byte by byte.

Usage: ptx-check.py PTX_FILE KERNEL_REGEX [KERNEL_REGEX ...]
       ptx-check.py --self-test

For every .entry whose (mangled) name matches one of the regexes, the check reads its body and the
bodies of the functions it calls (transitively) and fails when
  - they load single bytes from global memory (ld.global[.nc…].u8/.s8/.b8, or a generic ld.u8
    whose state space the compiler could not prove), or
  - they contain no dp4a (the integer dot products the decode matvecs are built on),
and when no entry matches at all (a renamed kernel must not pass unchecked). It prints, per kernel,
its 16-byte global loads, byte loads and dp4a count. Used by ctest (tests/kernels/CMakeLists.txt)
on matvec.cu compiled for sm_90, so CI fails when the hot loop regresses (issue 18).
"""
import re
import shutil
import subprocess
import sys

ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$]+)\s*\(", re.M)
FUNC = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.func\s+(?:\([^)]*\)\s*)?([\w$]+)\s*\(", re.M)
# A byte load from global memory, or from generic memory (no state space named).
BYTE_LOAD = re.compile(r"\bld(?:\.global(?:\.[\w:]+)*|(?:\.(?:volatile|relaxed|weak|L1::[\w:]+|"
                       r"L2::[\w:]+|nc))*)\.[usb]8\b")
WIDE_LOAD = re.compile(r"\bld\.global(?:\.[\w:]+)*\.v4\.[usbf]32\b")
CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([\w$]+)")


def bodies(ptx, pattern):
    """Name → body text (from the opening brace to its matching closing brace)."""
    found = {}
    for match in pattern.finditer(ptx):
        start = ptx.find("{", match.end())
        if start < 0:
            continue
        # A declaration without a body ends with ';' before any '{'.
        if ";" in ptx[match.end():start]:
            continue
        depth, i = 0, start
        while i < len(ptx):
            if ptx[i] == "{":
                depth += 1
            elif ptx[i] == "}":
                depth -= 1
                if depth == 0:
                    break
            i += 1
        found[match.group(1)] = ptx[start:i + 1]
    return found


def demangle(name):
    if shutil.which("c++filt") is None:
        return name
    out = subprocess.run(["c++filt", name], capture_output=True, text=True)
    return out.stdout.strip() or name


def with_callees(body, funcs):
    """The body and those of every function it calls, transitively."""
    text, seen, todo = [body], set(), [body]
    while todo:
        for callee in CALL.findall(todo.pop()):
            if callee in funcs and callee not in seen:
                seen.add(callee)
                text.append(funcs[callee])
                todo.append(funcs[callee])
    return "\n".join(text)


def check(ptx, regexes, out=sys.stdout):
    """Returns the number of failed kernels (1 when none matched)."""
    entries = bodies(ptx, ENTRY)
    funcs = bodies(ptx, FUNC)
    wanted = [re.compile(r) for r in regexes]
    checked = failed = 0
    for name, body in sorted(entries.items()):
        if not any(w.search(name) for w in wanted):
            continue
        checked += 1
        code = with_callees(body, funcs)
        byte_loads = BYTE_LOAD.findall(code)
        wide = len(WIDE_LOAD.findall(code))
        dp4a = len(re.findall(r"\bdp4a\.", code))
        problems = []
        if byte_loads:
            problems.append(f"{len(byte_loads)} byte loads from global memory")
        if dp4a == 0:
            problems.append("no dp4a")
        verdict = "FAIL: " + ", ".join(problems) if problems else "ok"
        print(f"{verdict:40s} {wide:4d} x ld.global.v4  {len(byte_loads):4d} x byte loads  "
              f"{dp4a:4d} x dp4a  {demangle(name)}", file=out)
        failed += bool(problems)
    if checked == 0:
        print(f"FAIL: no kernel matches {' '.join(regexes)}", file=out)
        return 1
    return failed


GOOD = """
.visible .entry _Z9q8_goodPKhPf(.param .u64 a, .param .u64 b)
{
    ld.global.nc.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];
    ld.global.nc.u16 %rs1, [%rd2];
    ld.shared.u8 %rs2, [%rd3];
    dp4a.s32.s32 %r5, %r1, %r2, %r5;
    call.uni (retval0), tail_helper, (param0);
    ret;
}
.func (.param .b128 func_retval0) tail_helper(.param .b64 p)
{
    ld.global.nc.u16 %rs1, [%rd1];
    ret;
}
"""
BYTES = """
.visible .entry _Z10q8_bytesPKhPf(.param .u64 a)
{
    ld.global.nc.u8 %rs1, [%rd1];
    dp4a.s32.s32 %r5, %r1, %r2, %r5;
    ret;
}
"""
CALLEE_BYTES = """
.visible .entry _Z11q8_calleePKh(.param .u64 a)
{
    dp4a.s32.s32 %r5, %r1, %r2, %r5;
    call.uni helper, (param0);
    ret;
}
.func helper(.param .b64 p)
{
    ld.global.L1::no_allocate.s8 %rs1, [%rd1];
    ret;
}
"""
NO_DP4A = """
.visible .entry _Z9q8_floatPKhPf(.param .u64 a)
{
    ld.global.nc.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];
    fma.rn.f32 %f1, %f2, %f3, %f1;
    ret;
}
"""
GENERIC_BYTES = """
.visible .entry _Z11q8_genericPKh(.param .u64 a)
{
    ld.u8 %rs1, [%rd1];
    dp4a.s32.s32 %r5, %r1, %r2, %r5;
    ret;
}
"""


def self_test():
    """The check on small PTX texts: it passes the good one and fails each defect."""
    import io
    cases = [(GOOD, ["q8_"], 0), (BYTES, ["q8_"], 1), (CALLEE_BYTES, ["q8_"], 1),
             (NO_DP4A, ["q8_"], 1), (GENERIC_BYTES, ["q8_"], 1), (GOOD, ["absent_kernel"], 1)]
    bad = 0
    for i, (ptx, regexes, want) in enumerate(cases):
        got = check(ptx, regexes, out=io.StringIO())
        if got != want:
            print(f"self-test case {i}: {got} failures, expected {want}")
            bad += 1
    print("self-test:", "ok" if bad == 0 else f"{bad} cases wrong")
    return 1 if bad else 0


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        return self_test()
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[1], encoding="utf-8") as f:
        ptx = f.read()
    return 1 if check(ptx, argv[2:]) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
