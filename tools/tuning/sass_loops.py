"""The sm90 GEMM's K loops in SASS: for every kernel variant, each loop whose body holds wgmma (a backward
branch over HGMMA), with its wgmma width, HGMMA count, instructions, instructions per 64-wide K step (four
k16 wgmma each) and R2UR count (a descriptor or ring position moved from a vector into a uniform register
inside the loop: 9% more instructions per step). The loops the kernel runs per tile width are the short
ones; longer ones are outer loops (over units) that contain them.

Input: a cuobjdump listing of the built extension, e.g.
  cuobjdump --dump-sass --gpu-architecture sm_90a fastlaunch/_C*.so > sass.txt   (tools/gpu_check.sh writes one)

python tools/tuning/sass_loops.py sass.txt [--all]     (--all: the outer loops too)
python tools/tuning/sass_loops.py sass.txt --hand-over (the split tiles' hand-over loads in flight, per kernel)
"""
import argparse
import re

GEMM = "nvfp4_group_gemm"
_INS = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s*(.*?);", re.M)


def functions(text):
    """{mangled name: its SASS} for every function in a cuobjdump listing."""
    parts = re.split(r"\n\s*Function : (\S+)\n", text)
    return dict(zip(parts[1::2], parts[2::2]))


def loops(body):
    """Every loop of one function: [(start, end, instructions)] for each backward branch, its instructions
    from the branch's target to it, shortest first."""
    ins = [(int(a, 16), re.sub(r"/\*.*?\*/", "", t).strip()) for a, t in _INS.findall(body)]
    out = []
    for addr, text in ins:
        if "BRA" not in text:
            continue
        target = re.findall(r"0x([0-9a-f]+)", text)
        if not target or int(target[-1], 16) >= addr:
            continue
        start = int(target[-1], 16)
        out.append((start, addr, [t for a, t in ins if start <= a <= addr]))
    return sorted(out, key=lambda x: len(x[2]))


def k_loops(body, with_text=False):
    """The loops of one function whose body holds HGMMA, innermost first: [(width, HGMMA, instructions,
    R2UR)] (width: the wgmma N of the body's first HGMMA); with_text: each also with its instructions, one
    per line."""
    out = []
    for _start, _end, inside in loops(body):
        hgmma = [t for t in inside if re.search(r"\bHGMMA\b", t)]
        if hgmma:
            width = int(re.search(r"HGMMA\.64x(\d+)x16", hgmma[0]).group(1))
            out.append((width, len(hgmma), len(inside), sum(bool(re.search(r"\bR2UR\b", t)) for t in inside))
                       + (("\n".join(inside),) if with_text else ()))
    return sorted(out, key=lambda x: x[2])


def inner_loops(body):
    """Each wgmma width's innermost loop in one function: {width: (HGMMA, instructions, R2UR, its
    instructions one per line)}."""
    inner = {}
    for width, *rest in k_loops(body, with_text=True):  # shortest first
        inner.setdefault(width, tuple(rest))
    return inner


def hand_over_runs(body):
    """The split tiles' hand-over reads in one function (kernels/sm90/stream_k.cuh add_partials: 128-bit strong loads of
    the partners' sums, then their adds): the length of each run of such loads before the next FADD, in
    program order. The main build keeps a half's 8-12 in flight; fewer means more round trips per read."""
    runs, cur = [], 0
    for line in body.splitlines():
        if re.search(r"\bLDG\.E\.128\.STRONG\.GPU\b", line):
            cur += 1
        elif re.search(r"\bFADD\b", line) and cur:
            runs.append(cur)
            cur = 0
    return runs


def kernel_tag(name):
    """A GEMM kernel's template arguments as mangled (e.g. Li16ELb0ELb0ELb0ELi0E), else its whole name."""
    tag = re.search(r"gemmI(.*?)EEvNS", name)
    return tag.group(1) if tag else name


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sass", help="cuobjdump --dump-sass listing")
    ap.add_argument("--all", action="store_true", help="also the outer loops that contain the K loops")
    ap.add_argument("--hand-over", action="store_true",
                    help="instead: per kernel, the runs of hand-over loads in flight before an add (hand_over_runs)")
    a = ap.parse_args(argv)
    with open(a.sass) as f:
        funcs = functions(f.read())
    if a.hand_over:
        print("| kernel | hand-over loads in flight, per run |")
        print("|---|---|")
        for name, body in funcs.items():
            if GEMM in name:
                print(f"| {kernel_tag(name)} | {' '.join(map(str, hand_over_runs(body))) or '-'} |")
        return
    print("| kernel | width | HGMMA | instructions | per K step | R2UR |")
    print("|---|---|---|---|---|---|")
    for name, body in funcs.items():
        if GEMM not in name:
            continue
        loops = k_loops(body)
        # the innermost loop of each width unless --all
        seen = set()
        for width, hgmma, n, r2ur in loops:
            if not a.all and width in seen:
                continue
            seen.add(width)
            print(f"| {kernel_tag(name)} | {width} | {hgmma} | {n} | {n / (hgmma / 4):.1f} | {r2ur} |")


if __name__ == "__main__":
    main()
