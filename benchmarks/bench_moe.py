"""A Mixtral-style mixture-of-experts block (router, top-k, experts of two GEMMs with SwiGLU between) whose experts
run through fastlaunch, against the same block in bf16 on torch._grouped_mm, in one run.

Weights: random bf16 gate-up [E, 2F, H] and down [E, H, F] (std 1/sqrt of the inputs), quantised once to NVFP4 by
fastlaunch.quantize; both blocks use those same values (the bf16 block the NVFP4 weights dequantised, exactly), so
the comparison is of the two ways to compute one model, not of two models.

  fastlaunch   weight-only masked form: the bf16 activations scattered into [E, max_m, H], counts per expert on
               the device, fastlaunch.grouped_mm_masked with sfa None and bf16 out for gate-up, SwiGLU (bf16),
               again for down, gathered back and weighted; max_m = tokens
  contiguous   fastlaunch's contiguous layout: the assignments sorted by expert (bf16), device-side offsets,
               fastlaunch.grouped_mm_contiguous for both GEMMs (the layout a prefill step routes into)
  torch bf16   the assignments sorted by expert, torch._grouped_mm with device-side offsets for both GEMMs
Both route alike (the same bf16 router, top-k of its logits, softmax over the chosen) and never read a size on the
host, so each decode step is captured in one CUDA graph.

Columns: time per step (decode: CUDA-graph replays, prefill: eager calls; CUDA events, median), and each block's
error against an fp32 reference of the same routing and dequantised weights: max |y - ref| / max |ref|.

python benchmarks/bench_moe.py [--experts 8] [--top-k 2] [--hidden 4096] [--ffn 14336] [--decode 1,8,32]
                               [--prefill 2048] [--reps 20] [--json out.json] [--dry-run]
--dry-run (no GPU needed): a small block on the CPU (E=4, H=128, F=192, 5 tokens) through the ops' CPU
implementations and torch._grouped_mm on the CPU, both checked against the reference; nothing timed.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this clone's package

import torch
import torch.nn.functional as F

import fastlaunch
from fastlaunch import reference as R
from fastlaunch.timing import events_us


class Weights:
    """The experts' weights: NVFP4 (packed, blocked scales) for fastlaunch, the same values in bf16 [E, K, N] (as
    torch._grouped_mm takes them) and fp32 for the reference, and the router's bf16 [H, E]."""

    def __init__(self, experts: int, hidden: int, ffn: int, seed: int, device):
        gen = torch.Generator(device=device).manual_seed(seed)
        w13 = torch.randn(experts, 2 * ffn, hidden, generator=gen, device=device) / hidden ** 0.5
        w2 = torch.randn(experts, hidden, ffn, generator=gen, device=device) / ffn ** 0.5
        self.router = (torch.randn(hidden, experts, generator=gen, device=device) / hidden ** 0.5).to(torch.bfloat16)
        self.ffn = ffn
        self.q13, _s13, self.b13 = fastlaunch.quantize(w13.to(torch.bfloat16))
        self.q2, _s2, self.b2 = fastlaunch.quantize(w2.to(torch.bfloat16))
        self.f13 = dequantised(self.q13, self.b13, 2 * ffn)  # fp32 [E, 2F, H]
        self.f2 = dequantised(self.q2, self.b2, hidden)      # fp32 [E, H, F]
        self.t13 = self.f13.to(torch.bfloat16).transpose(-2, -1)  # exact: E2M1 x E4M3 values are bf16 values
        self.t2 = self.f2.to(torch.bfloat16).transpose(-2, -1)


def dequantised(packed: torch.Tensor, blocked: torch.Tensor, rows: int) -> torch.Tensor:
    plain = R.unblock_scales(blocked, rows)
    return torch.stack([R.dequantize(packed[e], plain[e]) for e in range(packed.shape[0])])


def route(x: torch.Tensor, w: Weights, top_k: int):
    """(experts [T, top_k], weights [T, top_k] fp32): top-k of the bf16 router logits, softmax over the chosen."""
    logits = (x @ w.router).float()
    top, experts = torch.topk(logits, top_k, dim=1)
    return experts, torch.softmax(top, dim=1)


def swiglu(h: torch.Tensor, ffn: int) -> torch.Tensor:
    return F.silu(h[..., :ffn].float()) * h[..., ffn:].float()


def block_fastlaunch(x: torch.Tensor, w: Weights, top_k: int) -> torch.Tensor:
    tokens, hidden = x.shape
    G = w.q13.shape[0]
    experts, weights = route(x, w, top_k)
    flat = experts.reshape(-1)  # assignment i: token i // top_k to expert flat[i]
    onehot = (flat[:, None] == torch.arange(G, device=x.device)).to(torch.int32)
    counts = onehot.sum(0, dtype=torch.int32)
    pos = (onehot.cumsum(0) - onehot).gather(1, flat[:, None]).squeeze(1)  # its row in the expert's rows
    token = torch.arange(tokens * top_k, device=x.device) // top_k
    a = x.new_zeros((G, tokens, hidden))  # bf16; max_m = tokens: a token's experts are distinct
    a[flat, pos] = x[token]
    h = fastlaunch.grouped_mm_masked(a, None, w.q13, w.b13, counts, out_dtype=torch.bfloat16)
    act = swiglu(h, w.ffn).to(torch.bfloat16)  # rows past the counts hold garbage that no stored row reads
    y = fastlaunch.grouped_mm_masked(act, None, w.q2, w.b2, counts, out_dtype=torch.bfloat16)
    rows = y[flat, pos].view(tokens, top_k, hidden)
    return (rows.float() * weights[..., None]).sum(1).to(torch.bfloat16)


def block_sorted(x: torch.Tensor, w: Weights, top_k: int, gemm, dtype) -> torch.Tensor:
    """The block with the assignments sorted by expert and each expert's end row on the device (counts summed there:
    bincount would read its size on the host); gemm(rows, which, offs) runs the gate-up (0) or down (1) GEMM on
    `dtype` rows and returns bf16."""
    tokens, hidden = x.shape
    G = w.q13.shape[0]
    experts, weights = route(x, w, top_k)
    flat = experts.reshape(-1)  # assignment i: token i // top_k to expert flat[i]
    order = torch.argsort(flat, stable=True)
    offs = (flat[:, None] == torch.arange(G, device=x.device)).sum(0).cumsum(0).to(torch.int32)
    h = gemm(x[order // top_k].to(dtype), 0, offs)
    y = gemm(swiglu(h, w.ffn).to(dtype), 1, offs)
    rows = torch.empty_like(y)
    rows[order] = y
    return (rows.view(tokens, top_k, hidden).float() * weights[..., None]).sum(1).to(torch.bfloat16)


def block_contiguous(x: torch.Tensor, w: Weights, top_k: int) -> torch.Tensor:
    weights = ((w.q13, w.b13), (w.q2, w.b2))

    def gemm(rows, which, offs):
        q, blocked = weights[which]
        return fastlaunch.grouped_mm_contiguous(rows, None, q, blocked, offs, out_dtype=torch.bfloat16)
    return block_sorted(x, w, top_k, gemm, torch.bfloat16)


def block_torch(x: torch.Tensor, w: Weights, top_k: int) -> torch.Tensor:
    return block_sorted(x, w, top_k, lambda rows, which, offs: torch._grouped_mm(rows, (w.t13, w.t2)[which], offs=offs),
                        torch.bfloat16)


def block_reference(x: torch.Tensor, w: Weights, top_k: int) -> torch.Tensor:
    """fp32 of the same routing and dequantised weights."""
    experts, weights = route(x, w, top_k)
    y = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    xf = x.float()
    for e in range(w.q13.shape[0]):
        tok, slot = (experts == e).nonzero(as_tuple=True)
        if tok.numel():
            h = xf[tok] @ w.f13[e].T
            y.index_add_(0, tok, (swiglu(h, w.ffn) @ w.f2[e].T) * weights[tok, slot, None])
    return y


def error(y: torch.Tensor, ref: torch.Tensor) -> float:
    return float((y.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def decode_us(block, x, reps: int) -> float:
    """Median us of one step replayed from a CUDA graph (the block captured once on a static input)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        block(x)  # warm-up off the capture: plans, maps, the allocator's blocks
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        block(x)
    graph.replay()
    torch.cuda.synchronize()
    return events_us(graph.replay, torch.cuda.synchronize, reps)


BLOCKS = (("fastlaunch", block_fastlaunch), ("contiguous", block_contiguous), ("torch bf16", block_torch))


def dry_run() -> int:
    seed = random.randrange(1 << 30)
    w = Weights(4, 128, 192, seed, "cpu")
    x = (torch.randn(5, 128, generator=torch.Generator().manual_seed(seed + 1))).to(torch.bfloat16)
    ref = block_reference(x, w, 2)
    errs = {name: error(fn(x, w, 2), ref) for name, fn in BLOCKS}
    ok = all(e < 0.05 for e in errs.values())  # each a few 16-bit roundings (~2^-9 each) of values near the max
    print(f"bench_moe dry run (seed {seed}): E=4 H=128 F=192, 5 tokens, top-2, on the CPU (the ops' CPU "
          f"implementations, torch._grouped_mm on the CPU): error against the fp32 reference " +
          ", ".join(f"{k} {v:.2e}" for k, v in errs.items()) + ("; ok" if ok else "; TOO LARGE"))
    return 0 if ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--top-k", type=int, default=2)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--decode", default="1,8,32", help="tokens per decode step, comma-separated")
    p.add_argument("--prefill", default="2048", help="tokens per prefill step, comma-separated")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--json")
    p.add_argument("--dry-run", action="store_true", help="no GPU: a small block on the CPU, checked, not timed")
    args = p.parse_args(argv)
    if args.dry_run:
        return dry_run()
    if not torch.cuda.is_available():
        print("bench_moe needs a CUDA GPU (--dry-run checks the blocks on the CPU)")
        return 2
    seed = random.randrange(1 << 30) if args.seed is None else args.seed
    w = Weights(args.experts, args.hidden, args.ffn, seed, "cuda")
    gen = torch.Generator(device="cuda").manual_seed(seed + 1)
    rows = []
    steps = [("decode", int(t)) for t in args.decode.split(",") if t] + \
            [("prefill", int(t)) for t in args.prefill.split(",") if t]
    for kind, tokens in steps:
        x = torch.randn(tokens, args.hidden, generator=gen, device="cuda").to(torch.bfloat16)
        ref = block_reference(x, w, args.top_k)
        row = {"step": kind, "tokens": tokens}
        for name, fn in BLOCKS:
            step = lambda fn=fn: fn(x, w, args.top_k)  # noqa: E731
            row[name + " error"] = error(step(), ref)
            row[name + " us"] = (decode_us(lambda xx: fn(xx, w, args.top_k), x, args.reps) if kind == "decode"
                                 else events_us(step, torch.cuda.synchronize, args.reps))
        rows.append(row)
        print(f"  {kind} {tokens} tokens: " + ", ".join(f"{k} {v:.3g}" for k, v in row.items()
                                                          if k not in ("step", "tokens")), file=sys.stderr)
    name = torch.cuda.get_device_name()
    print(f"bench_moe {datetime.datetime.now().isoformat(timespec='seconds')}: {name}, torch {torch.__version__}, "
          f"seed {seed}; E={args.experts} top-{args.top_k} H={args.hidden} F={args.ffn}; decode: CUDA-graph replays, "
          f"prefill: eager; median of {args.reps}")
    print()
    print("| step | tokens | fastlaunch masked us | fastlaunch contiguous us | torch bf16 us | torch / best fastlaunch "
          "| masked error | contiguous error | torch bf16 error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        best = min(r["fastlaunch us"], r["contiguous us"])
        print(f"| {r['step']} | {r['tokens']} | {r['fastlaunch us']:.1f} | {r['contiguous us']:.1f} | "
              f"{r['torch bf16 us']:.1f} | {r['torch bf16 us'] / best:.2f}x | {r['fastlaunch error']:.2e} | "
              f"{r['contiguous error']:.2e} | {r['torch bf16 error']:.2e} |")
    print("\nerror: max |y - ref| / max |ref| against fp32 of the same routing and weights; both blocks round their "
          "GEMM outputs and the SwiGLU product to bf16 (fastlaunch rounds its bf16 activations to fp16 inside)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": name, "torch": torch.__version__, "seed": seed, "args": vars(args), "rows": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
