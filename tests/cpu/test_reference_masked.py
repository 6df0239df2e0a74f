"""CPU tests of fastlaunch.reference's serving (masked) layout: the blocked scale layout against the contract's index
rule, the generator, the fp32 reference against an independent float64 computation, and the checker."""
import torch

from fastlaunch import reference as R
from conftest import fresh_seed


def _rule_lookup(blocked, rows, kb):
    """Plain [rows, kb] scale bytes read from a blocked [tiles, K//64, 32, 4, 4] array by the contract's rule: row i,
    K block j at (i//128, j//4, i%32, (i%128)//32, j%4)."""
    i = torch.arange(rows)[:, None]
    j = torch.arange(kb)[None, :]
    return blocked.view(torch.uint8)[i // 128, j // 4, i % 32, (i % 128) // 32, j % 4]


def test_block_scales_follow_the_index_rule_and_unblock_inverts_them():
    seed = fresh_seed()
    gen = torch.Generator().manual_seed(seed)
    for rows, kb in ((1, 4), (32, 8), (128, 4), (129, 12), (300, 16)):
        plain = torch.randint(0, 256, (rows, kb), dtype=torch.uint8, generator=gen).view(torch.float8_e4m3fn)
        blocked = R.block_scales(plain, pad=0xAB)
        mt = -(-rows // 128)
        assert blocked.shape == (mt, kb // 4, 32, 4, 4) and blocked.is_contiguous()
        assert blocked.dtype == torch.float8_e4m3fn
        assert torch.equal(_rule_lookup(blocked, rows, kb), plain.view(torch.uint8))
        # every byte not reached by a row < rows is padding
        assert int((blocked.view(torch.uint8) == 0xAB).sum()) >= (mt * 128 - rows) * kb
        assert torch.equal(R.unblock_scales(blocked, rows).view(torch.uint8), plain.view(torch.uint8))
        with_experts = torch.stack([blocked, blocked])
        assert torch.equal(R.unblock_scales(with_experts, rows).view(torch.uint8),
                           torch.stack([plain, plain]).view(torch.uint8))


def test_unreorder_scales_inverts_the_task_layout():
    data = R.generate_input([300, 1, 128], [200, 72, 129], [192, 64, 256], 3, fresh_seed(), device="cpu",
                            full_range=True, scale_pad=0x7F)
    for (sfa, sfb), (sfa_r, sfb_r), (m, n, _k, _l) in zip(data[1], data[2], data[3]):
        assert torch.equal(R.unreorder_scales(sfa_r, m).view(torch.uint8), sfa[:, :, 0].view(torch.uint8))
        assert torch.equal(R.unreorder_scales(sfb_r, n).view(torch.uint8), sfb[:, :, 0].view(torch.uint8))


def test_masked_generator_layouts_and_values():
    seed = fresh_seed()
    a, sfa, b, sfb, masked_m, out = R.generate_masked_input(3, 200, 72, 256, [0, 200, 17], seed, device="cpu")
    assert a.dtype == torch.float4_e2m1fn_x2 and a.shape == (3, 200, 128) and a.is_contiguous()
    assert b.dtype == torch.float4_e2m1fn_x2 and b.shape == (3, 72, 128) and b.is_contiguous()
    assert sfa.dtype == torch.float8_e4m3fn and sfa.shape == (3, 2, 4, 32, 4, 4) and sfa.is_contiguous()
    assert sfb.shape == (3, 1, 4, 32, 4, 4) and sfb.is_contiguous()
    assert masked_m.dtype == torch.int32 and masked_m.tolist() == [0, 200, 17]
    assert out.dtype == torch.float16 and out.shape == (3, 200, 72) and out.isnan().all()
    for t in (a, b):
        raw = t.view(torch.uint8)
        assert set(torch.cat([raw & 0xF, raw >> 4]).unique().tolist()) <= {0, 1, 2, 3, 8, 9, 10, 11}
    assert set(R.unblock_scales(sfa, 200).float().unique().tolist()) == {1.0, 2.0}
    assert set(R.unblock_scales(sfb, 72).float().unique().tolist()) == {1.0, 2.0}
    again = R.generate_masked_input(3, 200, 72, 256, [0, 200, 17], seed, device="cpu", fp4_dtype=False,
                                    out_init="randn")
    assert again[0].dtype == torch.uint8 and torch.equal(again[0], a.view(torch.uint8))
    assert torch.isfinite(again[5]).all() and again[5].std() > 0.5
    other = R.generate_masked_input(3, 200, 72, 256, [0, 200, 17], seed + 1, device="cpu")
    assert not torch.equal(other[0].view(torch.uint8), a.view(torch.uint8))


def test_masked_generator_full_range_keeps_outputs_finite():
    values = torch.arange(0x7F, dtype=torch.uint8).view(torch.float8_e4m3fn).float()
    for k in (64, 256, 2048, 7168):
        codes = R.full_range_scale_codes(k)
        v = values[codes.long()]
        hi = v.max().item()
        lo = v.min().item()  # every E4M3 value in [hi/64, hi]
        assert lo >= hi / 64 and values[values < lo].max().item() < hi / 64 and len(codes) == len(v.unique())
        assert torch.equal(v, values[(values >= lo) & (values <= hi)]) and hi / lo > 32 and len(codes) >= 40
        assert k * (6 * hi) ** 2 <= 65504  # the worst dot product stays finite
        above = values[values > hi].min().item()
        assert k * (6 * above) ** 2 > 65504  # and hi is the largest scale that does so
    a, sfa, b, sfb, masked_m, _out = R.generate_masked_input(2, 300, 100, 512, [300, 120], fresh_seed(), device="cpu",
                                                             full_range=True)
    raw = a.view(torch.uint8)
    assert len(torch.cat([raw & 0xF, raw >> 4]).unique()) == 16
    ref = R.ref_masked(a, sfa, b, sfb, masked_m)
    assert torch.isfinite(ref[0]).all() and torch.isfinite(ref[1, :120]).all()
    assert torch.isfinite(ref[0].half()).all()


def test_ref_masked_against_float64_by_the_index_rule():
    seed = fresh_seed()
    g, max_m, n, k = 3, 150, 40, 192
    a, sfa, b, sfb, masked_m, _out = R.generate_masked_input(g, max_m, n, k, [150, 0, 61], seed, device="cpu",
                                                             full_range=True)
    ref = R.ref_masked(a, sfa, b, sfb, masked_m)
    table = torch.tensor(R.E2M1_VALUES, dtype=torch.float64)

    def dequant(packed, blocked, rows):
        raw = packed.view(torch.uint8)
        vals = torch.stack([table[(raw & 0xF).long()], table[(raw >> 4).long()]], -1).reshape(rows, k)
        scales = _rule_lookup(blocked, rows, k // 16).view(torch.float8_e4m3fn).double()
        return vals * scales.repeat_interleave(16, dim=1)

    for e, m in enumerate(masked_m.tolist()):
        da, db = dequant(a[e], sfa[e], max_m), dequant(b[e], sfb[e], n)
        exact = da @ db.T
        # fp32 holds every product exactly; a sum of k of them is off by at most k * 2^-24 * sum |terms|
        bound = k * 2.0**-24 * (da.abs() @ db.abs().T)
        assert ((ref[e, :m].double() - exact[:m]).abs() <= bound[:m]).all()
        assert ref[e, m:].isnan().all()


def test_ref_masked_agrees_with_the_task_reference():
    # The same operands as a task input (expert g = group g with masked_m[g] rows) and in the masked layout.
    ms, n, k = [37, 128, 1], 72, 256
    data = R.generate_input(ms, n, k, 3, fresh_seed(), device="cpu", full_range=True)
    task = R.ref_kernel(R.clone_outputs(data))
    max_m = 130
    a = torch.zeros(3, max_m, k // 2, dtype=torch.uint8)
    plain_a = torch.ones(3, max_m, k // 16).to(torch.float8_e4m3fn)
    for g, ((ag, _bg, _cg), (sa, _sb)) in enumerate(zip(data[0], data[1])):
        a[g, :ms[g]] = ag[:, :, 0].view(torch.uint8)
        plain_a[g, :ms[g]] = sa[:, :, 0]
    sfa = torch.stack([R.block_scales(x) for x in plain_a])
    b = torch.stack([t[1][:, :, 0].view(torch.uint8) for t in data[0]])
    sfb = torch.stack([R.block_scales(t[1]) for t in data[1]])
    ref = R.ref_masked(a, sfa, b, sfb, torch.tensor(ms, dtype=torch.int32))
    for g in range(3):
        assert torch.equal(ref[g, :ms[g]].half(), task[g][:, :, 0])


def test_check_masked_catches_each_kind_of_error():
    a, sfa, b, sfb, masked_m, out = R.generate_masked_input(2, 20, 24, 64, [5, 0], fresh_seed(), device="cpu")
    before = out.clone()
    ref = R.ref_masked(a, sfa, b, sfb, masked_m)
    out[0, :5] = ref[0, :5].half()
    assert R.check_masked(out, ref, masked_m, before) == (True, "ok")

    bad = out.clone()
    bad[0, 4, 3] += 1.0
    ok, msg = R.check_masked(bad, ref, masked_m, before)
    assert not ok and msg.startswith("expert 0: 1 of 120 elements in rows < masked_m=5 differ; first at (row 4, col 3)")
    bad = out.clone()
    bad[0, 2, 0] = float("nan")
    assert not R.check_masked(bad, ref, masked_m, before)[0]
    bad = out.clone()
    bad[1, 7, 2] = 0.0  # expert 1 computes no row: any write is wrong
    ok, msg = R.check_masked(bad, ref, masked_m, before)
    assert not ok and msg == ("expert 1: 1 elements in rows >= masked_m=0 were written; first at (row 7, col 2): "
                              "got 0.0, was nan")
    bad = out.clone()
    bad[0, 5] = 1.0  # the first row past the mask
    ok, msg = R.check_masked(bad, ref, masked_m, before)
    assert not ok and "expert 0: 24 elements in rows >= masked_m=5 were written; first at (row 5, col 0)" in msg
    assert not R.check_masked(out[:, :10], ref, masked_m, before)[0]
