"""Small calls of one plan family, each checked against the fp32 reference, for compute-sanitizer (tools/gpu_check.sh
sanitize runs every family under memcheck, racecheck, synccheck and initcheck). The family's forcing variables
(FASTLAUNCH_SM90_*) are read when the device is first used, so each family is a process of its own:

python tools/sanitize/cases.py FAMILY      (FAMILIES below; prints one line per call and exits 1 on a wrong one)
python tools/sanitize/cases.py --list      (the families and their variables, for the driver script)
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))  # this clone's package

# family -> (forcing variables, [(g, ms, ns, ks)] shapes); shapes small, as the sanitizers run kernels slowly
FAMILIES = {
    "auto": ({}, [(2, [96, 128], [128, 256], [256, 512]), (2, [192, 320], [256, 256], [512, 512])]),
    "whole": ({"FASTLAUNCH_SM90_SHARE": "whole"}, [(3, [80, 128, 256], [384, 256, 128], [256, 512, 256])]),
    "split": ({"FASTLAUNCH_SM90_SHARE": "split"}, [(2, [128, 72], [256, 384], [1024, 512])]),
    "reduce": ({"FASTLAUNCH_SM90_SHARE": "reduce"}, [(1, [40], [256], [2048])]),
    "half": ({"FASTLAUNCH_SM90_HALF": "1"}, [(2, [64, 200], [128, 256], [512, 256])]),
    "narrow": ({"FASTLAUNCH_SM90_NARROW": "1", "FASTLAUNCH_SM90_HALF": "0"}, [(4, [8, 30, 1, 17], [256, 256, 128, 384], [512, 256, 512, 256])]),
    # the direct-A kernels: every tile narrow, then one tile split over CTAs (and the masked form's below)
    "direct": ({"FASTLAUNCH_SM90_NARROW": "1", "FASTLAUNCH_SM90_HALF": "0", "FASTLAUNCH_SM90_SKINNY": "0",
                "FASTLAUNCH_SM90_DIRECT": "1"},
               [(4, [8, 30, 1, 17], [256, 256, 128, 384], [512, 256, 512, 256]), (1, [4], [256], [4096])]),
    "mid": ({"FASTLAUNCH_SM90_MID": "1", "FASTLAUNCH_SM90_WCAP": "192", "FASTLAUNCH_SM90_HALF": "0"}, [(2, [160, 176], [256, 128], [512, 256])]),
    "skinny": ({"FASTLAUNCH_SM90_SKINNY": "1"}, [(3, [1, 4, 16], [512, 256, 256], [1024, 512, 512])]),
    "skinny-split": ({"FASTLAUNCH_SM90_SKINNY": "1", "FASTLAUNCH_SM90_SKINNY_SPLIT": "2"},
                     [(1, [2], [512], [2048])]),
    "unaligned": ({}, [(2, [96, 40], [130, 77], [256, 128])]),
    "groups-70": ({}, [(70, [4] * 70, [128] * 70, [64] * 70)]),
    "wave": ({"FASTLAUNCH_SM90_SHARE": "wave"}, [(2, [1000, 500], [2048, 2048], [128, 128])]),  # 144 tiles: 2 turns
    "masked": ({}, []),  # the masked form: grouped_mm_masked below
    "masked-wave": ({"FASTLAUNCH_SM90_SHARE": "wave"}, []),  # ... in wave plans (tiles counted on the device)
    "masked-direct": ({"FASTLAUNCH_SM90_NARROW": "1", "FASTLAUNCH_SM90_SKINNY": "0", "FASTLAUNCH_SM90_DIRECT": "1"},
                      []),  # ... where every tile is narrow (max_m 24: its third call), on the direct-A kernel
    "serving": ({}, []),  # the weight-only masked form (bf16, fp16 a) and the contiguous layout (bf16, NVFP4 a)
}


def main(argv):
    if argv[1:] == ["--list"]:
        for name, (env, _shapes) in FAMILIES.items():
            print(name, " ".join(f"{k}={v}" for k, v in env.items()))
        return 0
    if len(argv) != 2 or argv[1] not in FAMILIES:
        print(f"usage: cases.py FAMILY (one of {', '.join(FAMILIES)}) | --list")
        return 2
    env, shapes = FAMILIES[argv[1]]
    for k, v in env.items():
        if os.environ.get(k) != v:
            print(f"{argv[1]}: set {k}={v} (the launcher reads it when the device is first used)")
            return 2
    import torch

    from fastlaunch import _C, reference as R

    wrong = 0
    for i, (g, ms, ns, ks) in enumerate(shapes):
        ok, msg = R.run_checked(_C.fast_launch, R.generate_input(ms, ns, ks, g, 100 + i, device="cuda"))
        wrong += not ok
        print(f"{argv[1]} {i}: G={g} M={ms[:4]} N={ns[:4]} K={ks[:4]}: {'ok' if ok else 'WRONG ' + msg}")
    if argv[1].startswith("masked"):
        # the last: two experts' 8 tiles of 64 K steps split over 64 CTAs by the device's schedule (8 steps each)
        for i, (g, max_m, n, k, counts) in enumerate([(3, 40, 256, 512, [0, 40, 7]), (2, 200, 128, 256, [200, 65]),
                                                      (4, 24, 512, 4096, [0, 9, 0, 3])]):
            a, sfa, b, sfb, mm, out = R.generate_masked_input(g, max_m, n, k, counts, 200 + i, device="cuda")
            before = out.clone()
            ref = R.ref_masked(a, sfa, b, sfb, mm)
            _C.grouped_mm_masked(a, sfa, b, sfb, mm, out)
            torch.cuda.synchronize()
            ok, msg = R.check_masked(out, ref, mm, before)
            wrong += not ok
            print(f"masked {i}: G={g} max_m={max_m} N={n} K={k} masked_m={counts}: {'ok' if ok else 'WRONG ' + msg}")
    if argv[1] == "serving":
        wrong += serving_forms(torch, R, _C)
    return 1 if wrong else 0


def serving_forms(torch, R, _C):
    """The forms whose A the conversion kernel permutes or decodes whole: weight-only masked calls (bf16 and fp16 a)
    and contiguous ones (bf16 and NVFP4 a, rows past the last offset owned by no expert); the count of wrong ones."""
    from fastlaunch import quantize
    wrong = 0
    gen = torch.Generator(device="cuda").manual_seed(300)
    for i, (g, max_m, n, k, counts, dt) in enumerate([(3, 40, 256, 512, [0, 40, 7], torch.bfloat16),
                                                      (2, 200, 128, 256, [200, 65], torch.float16),
                                                      (4, 24, 512, 4096, [0, 9, 0, 3], torch.bfloat16)]):
        _a, _sfa, b, sfb, mm, out = R.generate_masked_input(g, max_m, n, k, counts, 300 + i, device="cuda")
        x = torch.randn(g, max_m, k, generator=gen, device="cuda").to(dt)
        before = out.clone()
        _C.grouped_mm_masked(x, None, b, sfb, mm, out)
        torch.cuda.synchronize()
        ok, msg = R.check_masked(out, R.ref_masked(x, None, b, sfb, mm), mm, before)
        wrong += not ok
        print(f"weight-only {i}: G={g} max_m={max_m} N={n} K={k} a {dt}: {'ok' if ok else 'WRONG ' + msg}")
    G, T, n, k = 4, 300, 256, 512
    _a, _sfa, b, sfb, _mm, _out = R.generate_masked_input(G, 1, n, k, 0, 310, device="cuda")
    x = torch.randn(T, k, generator=gen, device="cuda").to(torch.bfloat16)
    q, _plain, blocked = quantize(x)
    offs = torch.tensor([0, 100, 100, 250], dtype=torch.int32, device="cuda")
    for name, a, sfa in (("bf16", x, None), ("NVFP4", q, blocked)):
        out = torch.full((T, n), float("nan"), dtype=torch.float16, device="cuda")
        before = out.clone()
        _C.grouped_mm_contiguous(a, sfa, b, sfb, offs, out)
        torch.cuda.synchronize()
        ok, msg = R.check_contiguous(out, R.ref_contiguous(a, b, sfb, offs, sfa=sfa), before)
        wrong += not ok
        print(f"contiguous {name}: G={G} T={T} N={n} K={k} offs={offs.tolist()}: {'ok' if ok else 'WRONG ' + msg}")
    return wrong


if __name__ == "__main__":
    sys.exit(main(sys.argv))
