"""CPU tests of the benchmark tools' shape selection (the timing itself needs a GPU)."""
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys

import pytest
import torch

import fastlaunch
from conftest import ROOT, load_tool, tool_path
from fastlaunch import reference as R
from fastlaunch.shapes import BENCH_SHAPES, TEST_SHAPES, random_shapes


def test_random_shapes_are_valid_and_repeatable():
    seed = random.randrange(1 << 30)
    shapes = random_shapes(50, seed)
    assert len(shapes) == 50 and shapes == random_shapes(50, seed), f"seed {seed}"
    for g, ms, ns, ks in shapes:
        assert 1 <= g <= 8 and len(ms) == len(ns) == len(ks) == g, f"seed {seed}"
        assert all(1 <= m <= 512 for m in ms) and all(1 <= n <= 2048 for n in ns), f"seed {seed}"
        assert all(k % 64 == 0 and 64 <= k <= 4096 for k in ks), f"seed {seed}"
    assert random_shapes(20, 1) != random_shapes(20, 2)


def test_random_shapes_pass_the_unpacker():
    seed = random.randrange(1 << 30)
    for g, ms, ns, ks in random_shapes(4, seed):
        data = R.generate_input(ms, ns, ks, g, seed, device="cpu")
        assert fastlaunch.unpack(data) == g, f"seed {seed}"


def test_bench_kernels_shape_selection():
    bk = load_tool("bench_kernels")
    args = bk.parse_args(["--tests", "--random", "3", "--seed", "5", "--shape", "2:64,128:256:512"])
    shapes = bk.select_shapes(args)
    extra = [(2, [64, 128], [256, 256], [512, 512])]
    assert shapes == list(BENCH_SHAPES) + extra + list(TEST_SHAPES) + random_shapes(3, 5)
    only = bk.select_shapes(bk.parse_args(["--only", "--random", "2", "--seed", "9"]))
    assert only == random_shapes(2, 9)
    per_group = bk.select_shapes(bk.parse_args(["--only", "--shape", "3:5,6,7:64:128,256,64"]))
    assert per_group == [(3, [5, 6, 7], [64, 64, 64], [128, 256, 64])]
    # the --shape text the tool prints for a shape reads back as that shape
    for shape in random_shapes(5, 11) + list(BENCH_SHAPES) + list(TEST_SHAPES):
        assert bk.parse_shape(bk.shape_arg(shape)) == tuple(shape)
    assert bk.shape_arg(BENCH_SHAPES[3]) == "2:128,384:4096:1536"


@pytest.mark.parametrize("text", ["2:64:128", "2:64,65,66:128:256", "3:1:2,3:64"])
def test_bench_kernels_rejects_bad_shapes(text):
    bk = load_tool("bench_kernels")
    with pytest.raises(SystemExit, match="--shape"):
        bk.parse_shape(text)
    fresh = bk.parse_args(["--random", "1"])
    assert isinstance(fresh.seed, int)  # drawn fresh, printed by the run


@pytest.mark.parametrize("tool,argv", [("bench_kernels", a) for a in (["--only"], ["--random", "-1"], ["--random", "x"])]
                         + [("bench_scaling", a) for a in (["--nk", "4096:100"], ["--nk", "4096"], ["--m", "0,4"],
                                                           ["--g", "x"], ["--sets", "0"], ["--reps", "0"],
                                                           ["--max-rows", "0"], ["--check-rows", "-1"])])
def test_benchmarks_reject_bad_options(tool, argv, capsys):
    with pytest.raises(SystemExit) as e:
        load_tool(tool).parse_args(argv)
    assert e.value.code == 2
    assert "error" in capsys.readouterr().err


def test_fp16_gemms_computes_every_group():
    # the small-call tools' cuBLAS anchor: C = A B^T per group, each group on its own call
    import torch
    from fastlaunch.timing import fp16_gemms
    every, one, (a, b, c) = fp16_gemms([3, 5], [4, 2], [8, 16], device="cpu")
    for x in c:
        x.fill_(float("nan"))
    one(1)
    assert torch.isnan(c[0]).all() and not torch.isnan(c[1]).any()
    every()
    for x, y, z in zip(a, b, c):
        assert z.shape == (x.shape[0], y.shape[0])
        assert torch.allclose(z.float(), x.float() @ y.float().T, rtol=1e-2, atol=1e-2)


def test_sweep_modes_set_their_variables(monkeypatch):
    sweep = load_tool("sweep_sm90")
    env = sweep.mode_env("share:split:3")
    assert env["FASTLAUNCH_SM90_SHARE"] == "split:3" and "FASTLAUNCH_SM90_HALF" not in env
    assert sweep.mode_env("half:1")["FASTLAUNCH_SM90_HALF"] == "1"
    env = sweep.mode_env("skinny:1:4")
    assert env["FASTLAUNCH_SM90_SKINNY"] == "1" and env["FASTLAUNCH_SM90_SKINNY_SPLIT"] == "4"
    assert "FASTLAUNCH_SM90_SKINNY_SPLIT" not in sweep.mode_env("skinny:1")
    env = sweep.mode_env("skinny:1:0:32")
    assert env["FASTLAUNCH_SM90_SKINNY_LANES"] == "32" and "FASTLAUNCH_SM90_SKINNY_SPLIT" not in env
    assert sweep.mode_env("skinny:1:2:8")["FASTLAUNCH_SM90_SKINNY_SPLIT"] == "2"
    assert sweep.describe("skinny:1:0:32") == "skinny kernel where allowed, the planner's K split, 32 lanes per row"
    assert sweep.mode_env("cap:128")["FASTLAUNCH_SM90_WCAP"] == "128"
    assert sweep.mode_env("rows:1")["FASTLAUNCH_SM90_ROWS"] == "1"
    assert sweep.mode_env("rows:0")["FASTLAUNCH_SM90_ROWS"] == "0"
    assert sweep.describe("rows:1") == "device schedule where it fits"
    assert sweep.mode_env("direct:1")["FASTLAUNCH_SM90_DIRECT"] == "1"
    env = sweep.mode_env("rows:1:128")
    assert env["FASTLAUNCH_SM90_ROWS"] == "1" and env["FASTLAUNCH_SM90_WCAP"] == "128"
    assert sweep.describe("rows:1:128") == "device schedule where it fits, widths <= 128"
    monkeypatch.setenv("FASTLAUNCH_SM90_ROWS", "1")  # a setting of the caller's is not passed on
    assert not any(k.startswith("FASTLAUNCH_SM90_") for k in sweep.mode_env("cublas"))
    assert sweep.describe("share:split:3") == "split tiles, 3 CTAs per tile"
    assert sweep.describe("half:0") == "no half tiles" and sweep.describe("cublas") == "cuBLAS fp16 per group"


def test_sweep_shape_sets_are_valid():
    sweep = load_tool("sweep_sm90")
    sets = sweep.shape_sets()
    assert {"bench", "tests", "hand", "slow", "longk"} <= set(sets)
    for name, (shapes, names) in sets.items():
        assert len(shapes) == len(names) == len(set(names)), name
        for g, ms, ns, ks in shapes:
            assert len(ms) == len(ns) == len(ks) == g, name
            assert all(k % 64 == 0 for k in ks), name
            data = R.generate_input(ms, ns, ks, g, 1, device="cpu")
            assert fastlaunch.unpack(data) == g, name


def test_sweep_takes_random_sets():
    sweep = load_tool("sweep_sm90")
    from fastlaunch import shapes as S
    shapes, names = sweep.resolve_set("random:431703237")
    assert shapes == S.random_shapes(8, 431703237) and len(names) == len(set(names)) == 8
    assert sweep.resolve_set("longk") == sweep.shape_sets()["longk"]
    for bad in ("random:", "random:x1", "random:-3", "longks"):
        with pytest.raises(SystemExit, match="--set"):
            sweep.resolve_set(bad)


def test_trace_modes_map_to_the_sweep_settings():
    trace = load_tool("trace_sm90")
    assert trace.trace_env("gemm")["FASTLAUNCH_SM90_ONLY"] == "gemm"
    assert trace.trace_env("half:0")["FASTLAUNCH_SM90_HALF"] == "0"
    assert not any(k in trace.trace_env("whole") for k in ("FASTLAUNCH_SM90_ONLY", "FASTLAUNCH_SM90_HALF"))
    a = trace.shapes_modes_parser("doc", "1,2", "whole").parse_args(["--modes", "gemm,half:1"])
    assert a.shapes == "1,2" and a.modes == "gemm,half:1"
    from fastlaunch import shapes as S
    assert trace.shape_list("random:255658716") == S.random_shapes(8, 255658716)
    assert trace.shape_list("tests") == S.TEST_SHAPES and trace.shape_list("bench") == S.BENCH_SHAPES
    assert trace.shape_list("longk") == load_tool("sweep_sm90").LONGK_SHAPES
    with pytest.raises(SystemExit, match="--set"):
        trace.shape_list("benches")


def test_trace_summary_skips_events_a_cta_did_not_record():
    # per CTA [globaltimer ns, clock64] per event; the half-tile kernel records no first_full
    trace = load_tool("trace_sm90")
    ev = trace.EVENTS

    def cta(t0, full):
        c = [[0, 0] for _ in range(16)]
        for i, name in enumerate(ev):
            c[i] = [t0 + 1000 * (i + 1), 2000 * (i + 1)]
        if not full:
            c[ev.index("first_full")] = [0, 0]
        return c

    res = trace.summarise({"us": 9.0, "trace": [cta(0, True), cta(500, False), [[0, 0]] * 16]})
    assert res["ctas"] == 2 and res["event_us"] == 9.0
    assert res["first stage lands"] == 1.0 and res["barrier init"] == 1.0  # from the CTA that has it / both
    assert res["busiest CTA"] == res["median CTA"] == 8.0  # entry to consumer_done
    slow = cta(0, True)
    slow[ev.index("consumer_done")][0] += 4000
    res = trace.summarise({"us": 9.0, "trace": [slow, cta(0, True), cta(0, True)]})
    assert res["busiest CTA"] == 12.0 and res["median CTA"] == 8.0
    res = trace.summarise({"us": 9.0, "trace": [cta(0, False)]})
    assert res["first stage lands"] != res["first stage lands"]  # NaN: no CTA recorded it


def test_cta_balance_groups_ctas_by_what_their_shares_hold(tmp_path, capsys):
    bal = load_tool("cta_balance")
    assert bal.plan_args("whole") == (0, 0, 0, 0, 0) and bal.plan_args("share:split") == (2, 0, 0, 0, 0)
    assert bal.plan_args("cap:128") == (0, 128, 0, 0, 0) and bal.plan_args("half:0") == (0, 0, 2, 0, 0)
    assert bal.plan_args("mid:0") == (0, 0, 0, 0, 2) and bal.plan_args("narrow:1") == (0, 0, 0, 1, 0)
    with pytest.raises(ValueError, match="share:whole and share:split"):
        bal.plan_args("share:split:4")  # S CTAs per tile: not a plan the model can find again
    # tools/tuning/fit_sm90.py reads its traced modes with the same parser (a split:S mode is skipped, not fitted as auto)
    assert load_tool("fit_sm90").plan_args("share:whole") == bal.plan_args("share:whole") == (1, 0, 0, 0, 0)
    # the planner's plan of benchmark 1 runs the mid build (a wgmma narrower than its 192-wide tiles): not the
    # model's; with the mid build off (mode mid:0) it is
    bench1 = list(zip(*BENCH_SHAPES[0][1:]))
    with pytest.raises(ValueError, match="only the main build"):
        bal.cta_units(bench1, 132, *bal.plan_args("auto"))
    assert len(bal.cta_units(bench1, 132, *bal.plan_args("mid:0"))) == 132
    for mode in ("share:reduce", "share:split:3"):
        with pytest.raises(ValueError, match="only share:whole and share:split"):
            bal.plan_args(mode)
    # benchmark 3 under the planner: split tiles; CTA b takes 10 + b us in every traced call
    ctas = bal.cta_units(list(zip(*BENCH_SHAPES[2][1:])), 132, 0, 0, 0)  # as the traced mode "whole" plans
    steps = {(w, k) for units in ctas for w, lo, hi, k, _ in units}
    assert steps <= {(w, 64) for w in fastlaunch._C.tile_widths} and len(ctas) > 1
    ev = load_tool("trace_sm90").EVENTS
    entry, done = ev.index("entry"), ev.index("consumer_done")

    def cta(b):
        c = [[0, 0] for _ in range(16)]
        c[entry], c[done] = [1000, 1], [1000 + 1000 * (10 + b), 2]
        return c

    trace = [cta(b) for b in range(len(ctas))] + [[[0, 0]] * 16] * 3  # unused slots stay zero
    raw = {"mode": "whole", "set": "bench", "shape": 2, "runs": [{"us": 1.0, "trace": trace}] * 2}
    table, fit, busiest = bal.kinds(raw, 132)
    assert sum(r[3] for r in table) == len(ctas) and len({r[:3] for r in table}) == len(table) > 1
    assert busiest[0] == 10 + len(ctas) - 1 and len(fit) == 2
    for reads, writes, stored, n, med, lo, hi, *_ in table:
        mine = [10 + b for b, units in enumerate(ctas)
                if (sum(len(u[4]) for u in units), sum(u[2] < u[3] for u in units), sum(u[2] == u[3] for u in units))
                == (reads, writes, stored)]
        assert len(mine) == n and (lo, hi) == (min(mine), max(mine)) and med == statistics.median(mine)
    # a plan of another SM count is not the traced one
    assert bal.kinds(dict(raw, runs=[{"us": 1.0, "trace": trace}]), 100) is None
    # the command line, with each fit's costs: the same kinds, predictions from that fit
    path = tmp_path / "raw.json"
    path.write_text(json.dumps([raw]))
    lines = {}
    for fit_name in sorted(bal.FITS):
        bal.main([str(path), "--costs", fit_name])
        lines[fit_name] = capsys.readouterr().out
        assert f"busiest CTA {busiest[0]:.2f} us" in lines[fit_name]
    assert len(set(lines.values())) == len(bal.FITS)  # the predictions differ between fits


def test_cta_balance_critical_path_waits_for_the_partners_flags():
    bal = load_tool("cta_balance")
    costs = {"const": 0, "step": {128: 1000}, "store": {128: 500}, "write": 300, "read": 2000}
    # CTA 0 ends inside tile 0 (steps 0-10 of 20), CTA 1 finishes it from step 10, reading CTA 0's sums:
    # CTA 0's flag goes up at its end (it has no other unit)
    lin, cp = bal.predict([[(128, 0, 10, 20, ())], [(128, 10, 20, 20, (0,))]], costs, 700)
    assert lin == [10.3, 12.5] and cp == [10.3, 11.5]  # 11.5: max(10.0, 10.3) + 0.7 read + 0.5 store
    # CTA 0 also holds a whole tile after it: its flag goes up after that tile's K loop (30.3 us)
    lin, cp = bal.predict([[(128, 0, 10, 20, ()), (128, 0, 20, 20, ())], [(128, 10, 20, 20, (0,))]], costs, 700)
    assert lin == [30.8, 12.5] and cp == [30.8, 31.5]


def test_plan_time_covers_every_launch_set():
    pt = load_tool("plan_time")
    seed = random.randrange(1 << 30)
    rows = pt.rows(1, 2, seed, 132)
    assert [r[1] for r in rows] == [1, 1, 1, 1, len(TEST_SHAPES), 2, 2], f"seed {seed}"
    for label, n, pm, px, cm, cx in rows:
        assert 0 < pm <= px < 1e6 and 0 < cm <= cx < 1e6, (label, seed)
    with pytest.raises(SystemExit):
        pt.main(["--reps", "0"])


def test_cta_balance_first_unit_steps():
    """first_steps: each CTA's first K loop over its first unit's steps, the median over the CTAs."""
    bal = load_tool("cta_balance")
    ctas = bal.cta_units(list(zip(*BENCH_SHAPES[2][1:])), 132, 0, 0, 0)
    ev = load_tool("trace_sm90").EVENTS
    entry, full, loop = ev.index("entry"), ev.index("first_full"), ev.index("first_mainloop")

    def cta(b, units):
        steps = units[0][2] - units[0][1]
        c = [[0, 0] for _ in range(16)]
        c[entry], c[full] = [1000, 1], [5000, 100]
        c[loop] = [5000 + steps * (300 + b), 100 + steps * (500 + b)]  # 300 + b ns, 500 + b cycles per step
        return c

    trace = [cta(b, u) for b, u in enumerate(ctas)] + [[[0, 0]] * 16] * 3
    raw = {"mode": "whole", "set": "bench", "shape": 2, "runs": [{"us": 1.0, "trace": trace}] * 3}
    ns, cyc, steps = bal.first_steps(raw, 132)
    mid = statistics.median(range(len(ctas)))
    assert (ns, cyc) == (300 + mid, 500 + mid)
    assert steps == statistics.median(u[0][2] - u[0][1] for u in ctas) and steps > 0
    assert bal.first_steps(raw, 100) is None  # a plan of another SM count is not the traced one


STUB_SWEEP = """import os, sys
s = sys.argv[sys.argv.index("--set") + 1]
n = 4 if s == "bench" else 2
print("a line that is not a row")
print("| mode | variant | correct | " + " | ".join(f"{s} {i}" for i in range(n)) + " | geomean us |")
print("|---|---|---|" + "---|" * (n + 1))
for m in sys.argv[sys.argv.index("--set") + 2:]:
    tag = os.path.basename(os.getcwd())
    print(f"| {m} | {tag} | True | " + " | ".join(str(i) for i in range(n)) + " | 1.0 |")
"""


def test_ab_run_rounds_and_sets(tmp_path):
    # tools/tuning/ab_run.sh's control flow on stub trees (no GPU, no build): every tree timed on every set in
    # every round, the order reversed every other round, one table per set with the sweep's columns
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("no bash")
    trees = [tmp_path / "work", tmp_path / "work" / ".ab" / "main", tmp_path / "work" / ".ab" / "v9"]
    for t in trees:
        (t / "tools" / "tuning").mkdir(parents=True)
        (t / "setup.py").write_text("")
        (t / "tools" / "tuning" / "sweep_sm90.py").write_text(STUB_SWEEP)
    shutil.copy(tool_path("ab_run.sh"), trees[0] / "tools" / "tuning" / "ab_run.sh")
    env = dict(os.environ, AB_TESTS="0", AB_ROUNDS="2", AB_SETS="bench tests", OUT=str(tmp_path))
    out = subprocess.run([bash, str(trees[0] / "tools" / "tuning" / "ab_run.sh"), "auto", "cap:128"], env=env,
                         capture_output=True, text=True, check=True).stdout
    tables = out.split("\nset ")[1:]
    assert [t.split(":")[0] for t in tables] == ["bench", "tests"], out
    for table, n in zip(tables, (4, 2)):
        lines = table.strip().split("\n")[1:]
        assert lines[0] == "| tree round | mode | variant | correct | " + " | ".join(
            f"{table.split(':')[0]} {i}" for i in range(n)) + " | geomean us |", lines[0]
        assert lines[1] == "|" + "---|" * (n + 5), lines[1]
        rows = [r.split(" | ")[0][2:] for r in lines[2:] if r.split(" | ")[1] == "auto"]
        assert rows == ["worktree r1", "main r1", "v9 r1", "v9 r2", "main r2", "worktree r2"], lines
        assert len(lines) - 2 == 12  # two modes per tree and round


def test_stress_settings_parse_and_name():
    stress = load_tool("stress_sm90")
    for text, want in [("128:whole:1", ("128", "whole", "1")), ("_:split:2:_", ("", "split:2", "")),
                       ("_:_:1", ("", "", "1")), ("128:reduce:3:_", ("128", "reduce:3", ""))]:
        assert stress.parse(text) == want
        assert stress.name(*want) == text
    with pytest.raises(SystemExit, match="expected cap:share:half"):
        stress.parse("128")


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="checks the report of a child that cannot run")
def test_stress_skinny_splits_parse():
    stress = load_tool("stress_sm90")
    assert stress.skinny_splits("0,1,2,4,8") == [0, 1, 2, 4, 8]
    for bad in ("", "9", "-1", "2,x"):
        with pytest.raises(SystemExit):
            stress.skinny_splits(bad)
    assert stress.skinny_lanes("8,32") == [8, 32] and stress.skinny_lanes("0") == [0]
    for bad in ("", "16", "8,x"):
        with pytest.raises(SystemExit):
            stress.skinny_lanes(bad)


def test_stress_reports_a_failed_child_as_a_failure():
    # With no GPU visible (none here; hidden on a GPU machine) the child process fails: the tool must say so
    # and exit 1, not report a clean run.
    tool = tool_path("stress_sm90.py")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    out = subprocess.run([sys.executable, tool, "--reps", "1", "--only", "128:whole:1"], capture_output=True,
                         text=True, timeout=300, env=env)
    assert out.returncode == 1, out.stdout[-2000:] + out.stderr[-2000:]
    assert "| 128:whole:1 | 0 | 0 | 0 |" in out.stdout
    assert "0 calls checked" in out.stdout and "1 settings with a nonzero exit" in out.stdout


def test_stress_hang_report_groups_ctas_by_the_points_they_reached():
    stress = load_tool("stress_sm90")
    assert stress.plan_args("128", "split:3", "") == (2, 128, 3, 0)
    assert stress.plan_args("", "reduce", "0") == (3, 0, 0, 2) and stress.plan_args("", "", "1") == (0, 0, 0, 1)
    case = (2, [300, 40], [8192, 4096], [256, 128])  # test_gpu's case with more tiles than SMs
    _groups, starts, _est, rows, _red, _wave = fastlaunch._C.plan(list(zip(*case[1:])), 132, 0, 0, 0, 1)
    ctas = len(starts) - 1
    assert rows == 64 and ctas > 8
    everything = list(range(10)) + [10, 11]
    stuck = random.randrange(ctas)
    reached = {str(b): everything for b in range(ctas) if b != stuck}
    reached[str(stuck)] = [0, 1, 3, 10, 11]  # the B producer's points only: its consumers never saw a stage
    lines = stress.hang_report({"case": 2, "sm_count": 132, "reached": reached}, case, ("", "", "1"))
    text = "\n".join(lines)
    assert f"1 CTAs reached entry, init, maps, b_share, b_first_tma; not gridwait, first_tma, first_full" in text
    assert f"    CTA {stuck}: steps from {tuple(starts[stuck])} to {tuple(starts[stuck + 1])}" in text
    assert f"{ctas - 1} CTAs reached entry, init, gridwait, maps" in text and "not -:" in text


def test_half_fit_data_and_replay():
    # tools/tuning/data/half_whole_draws.json: 64 random draws timed on the GPU on half tiles and without them;
    # tools/tuning/half_fit.py replays the planner's choice between the two kinds on them (CPU only).
    fit = load_tool("half_fit")
    with open(fit.DATA) as f:
        data = json.load(f)
    draws = data["draws"]
    assert len(draws) == 64 and data["sm_count"] == 132
    for d in draws:  # the draws are fastlaunch.shapes.random_shapes(8, seed)[index]
        g, ms, ns, ks = random_shapes(8, d["seed"])[d["index"]]
        assert (d["g"], d["m"], d["n"], d["k"]) == (g, ms, ns, ks)
        assert set(d["us"]) == {"auto", "half:0", "half:1"} and all(t > 0 for t in d["us"].values())
    rows = fit.replay(data)
    assert len(rows) == 64
    for d, half, t, other in rows:
        assert {t, other} == {d["us"]["half:0"], d["us"]["half:1"]}
        assert t == (d["us"]["half:1"] if half else d["us"]["half:0"])
    # replaying the compiled factor through --load gives the same choices
    again = fit.replay(data, fastlaunch._C.cost_model["half_load"])
    assert [r[1] for r in again] == [r[1] for r in rows]
    # with no factor the replay takes half tiles wherever their estimate is lower: more of them
    assert sum(r[1] for r in fit.replay(data, 0.0)) > sum(r[1] for r in rows)
    # --plans: each draw's two plans, the first of the kind half tiles forced
    est, ctas, b_rows, kind = fit.kind_plan(list(zip(draws[0]["m"], draws[0]["n"], draws[0]["k"])), 132, 1)
    assert kind == "half" and b_rows == 64 and 0 < ctas <= 132 and est > 0
    # this build's planner, scored by the measured times, is no slower than the planner the data was taken on
    geo, _n, _worst = fit.summary(rows)
    assert geo <= statistics.geometric_mean([d["us"]["auto"] for d in draws])


def test_device_us_sets_cycles_through_the_sets(monkeypatch):
    # the timed calls read input sets 0, 1, 2, 0, 1, ... (device_us stood in for: it needs CUDA events)
    from fastlaunch import timing
    seen = []

    def fake_device_us(fn, flush, reps=30):
        for _ in range(reps):
            fn()
        return 1.5

    monkeypatch.setattr(timing, "device_us", fake_device_us)
    assert timing.device_us_sets(seen.append, 3, None, reps=7) == 1.5
    assert seen == [0, 1, 2, 0, 1, 2, 0]


def test_bench_scaling_plan():
    bs = load_tool("bench_scaling")
    args = bs.parse_args([])
    p = bs.plan(args)
    assert args.nk == [(4096, 7168), (2048, 7168)] and (args.sets, args.reps, args.max_rows) == (3, 30, 65536)
    sweep = {(g, m, n, k) for n, k in args.nk for g in (1, 8, 64) for m in bs.M_VALUES}
    assert set(p.skipped) == {s for s in sweep if s[0] * s[1] > 65536} and len(p.skipped) == 6
    assert set(p.timed) == (sweep - set(p.skipped)) | p.extra and len(p.timed) == len(set(p.timed)) == 84
    assert p.extra == {(1, m, n, k) for n, k in args.nk for m in (16384, 32768, 65536)}
    assert len(p.pairs) == 2 * (14 + 11)
    for (g, m, n, k), one in p.pairs:
        assert g > 1 and one == (1, g * m, n, k) and one in p.timed and (g, m, n, k) in p.timed
    # ordered by (N, K) as given, then G, then M: each block's shapes together
    assert p.timed == sorted(p.timed, key=lambda s: (args.nk.index((s[2], s[3])), s[0], s[1]))
    assert bs.blocks(p.timed) == [(g, n, k) for n, k in args.nk for g in (1, 8, 64)]
    quick = bs.parse_args(["--quick"])
    assert quick.nk == [(4096, 7168)] and quick.m == list(bs.QUICK_M) and (quick.sets, quick.reps) == (2, 20)
    q = bs.plan(quick)
    assert q.skipped == [(64, 4096, 4096, 7168)] and (1, 65536, 4096, 7168) in q.extra
    given = bs.parse_args(["--quick", "--nk", "256:512", "--nk", "256:512", "--g", "4,2,4", "--m", "3,1",
                           "--max-rows", "8", "--sets", "1"])
    assert given.nk == [(256, 512)] and given.g == [2, 4] and given.m == [1, 3] and given.sets == 1
    assert bs.plan(given) == bs.Plan([(1, 2, 256, 512), (1, 4, 256, 512), (1, 6, 256, 512), (2, 1, 256, 512),
                                      (2, 3, 256, 512), (4, 1, 256, 512)], {(1, 2, 256, 512), (1, 4, 256, 512),
                                      (1, 6, 256, 512)}, [(4, 3, 256, 512)],
                                     [((2, 1, 256, 512), (1, 2, 256, 512)), ((2, 3, 256, 512), (1, 6, 256, 512)),
                                      ((4, 1, 256, 512), (1, 4, 256, 512))])


def small_scaling_input(bs, g, m, n, k, seed=1):
    """A bench_scaling input on the CPU: A of M rows and B of N rows per group, composed as the tool composes them."""
    return bs.compose(R.generate_input(m, 1, k, g, seed, device="cpu"),
                      R.generate_input(1, n, k, g, seed + 1, device="cpu"), "cpu")


def test_bench_scaling_compose_keeps_the_contract():
    bs = load_tool("bench_scaling")
    data = small_scaling_input(bs, 3, 5, 24, 128)
    assert fastlaunch.unpack(data) == 3 and data[3] == [(5, 24, 128, 1)] * 3
    whole = R.generate_input(5, 24, 128, 3, seed=4, device="cpu")
    for (a, b, c), (wa, wb, wc) in zip(data[0], whole[0]):
        for x, y in ((a, wa), (b, wb), (c, wc)):
            assert x.shape == y.shape and x.stride() == y.stride() and x.dtype == y.dtype
    with pytest.raises(ValueError, match="K="):
        bs.compose(R.generate_input(5, 1, 128, 1, 1, device="cpu"), R.generate_input(1, 24, 64, 1, 1, device="cpu"),
                   "cpu")


def test_bench_scaling_check_output():
    import torch
    bs = load_tool("bench_scaling")
    data = small_scaling_input(bs, 2, 9, 16, 128)
    out = R.ref_kernel(R.clone_outputs(data))
    assert bs.check_output(data, out, 0, 5) == (True, "ok", "every row")
    assert bs.check_output(data, out, 9, 5) == (True, "ok", "every row")  # no group has more than 9 rows
    ok, msg, checked = bs.check_output(data, out, 4, 5)
    assert ok and "4 random rows" in checked and "seed 5" in checked
    bad = [o.clone() for o in out]
    bad[1] += 1
    for rows in (0, 4):
        ok, msg, _ = bs.check_output(data, bad, rows, 5)
        assert not ok and msg.startswith("group 1:")
    unwritten = [o.clone() for o in out]
    unwritten[0][8, 3, 0] = float("nan")
    ok, msg, _ = bs.check_output(data, unwritten, 1, 5)
    assert not ok and "NaN" in msg and msg.startswith("group 0:")
    assert not bs.check_output(data, unwritten, 0, 5)[0]
    assert torch.equal(out[0], R.ref_kernel(R.clone_outputs(data))[0])  # the checks leave the output alone


def test_bench_scaling_sweep_on_the_cpu(monkeypatch, capsys, tmp_path):
    # the whole sweep with the reference standing in for the kernel and a call count for the device time: every
    # shape checked, both cuBLAS paths run on the inputs of every set, the tables, the summary and the JSON written
    bs = load_tool("bench_scaling")
    calls = {}

    def fake_device_us_sets(fn, sets, flush, reps=30):
        for i in range(reps):
            fn(i % sets)
        calls[fn] = reps
        return 10.0

    monkeypatch.setattr(bs.fastlaunch, "fast_launch", R.ref_kernel)
    monkeypatch.setattr(bs, "device_us_sets", fake_device_us_sets)
    args = bs.parse_args(["--nk", "64:128", "--g", "1,2", "--m", "1,3", "--sets", "2", "--reps", "3"])
    p = bs.plan(args)
    rows = bs.sweep(p, args, None, 1e12, 1e12, device="cpu")
    assert [(r["g"], r["m"], r["n"], r["k"]) for r in rows] == p.timed and all(r["ok"] for r in rows)
    assert [r["role"] for r in rows] == ["sweep", "one group", "sweep", "one group", "sweep", "sweep"]  # M 1 2 3 6 1 3
    for r in rows:
        assert r["cublas_path"] in (("mm",) if r["g"] == 1 else ("bmm", "mm per group"))
        assert r["floor_us"] == max(r["floor_compute_us"], r["floor_bytes_us"]) and r["x_floor"] == 10 / r["floor_us"]
        assert r["floor_compute_us"] == 2 * r["g"] * r["m"] * 64 * 128 / 1e12 * 1e6
        assert r["cublas_error"] < 1e-3  # cuBLAS's paths computed the reference's product
    pairs = bs.pair_rows(p, {(r["g"], r["m"], r["n"], r["k"]): r for r in rows})
    assert [(q["g"], q["m"], q["rows"]) for q in pairs] == [(2, 1, 2), (2, 3, 6)]
    assert all(q["ratio"] == 1.0 for q in pairs)
    bs.print_tables(rows, pairs)
    summ = bs.summary(rows, pairs, p, args)
    out = capsys.readouterr().out
    assert "| 64 | 128 | 2 | 3 | 10.0 |" in out and "all outputs correct: True" in out and summ["all_ok"]
    assert "worst many-vs-one ratio: 1.00" in out and "agree with fastlaunch's (relative error <= 0.01): True" in out
    json.dumps({"rows": rows, "pairs": pairs, "summary": summ, "skipped": p.skipped})
    # a failed shape is recorded and the summary says so
    rows[0].update(bs.failed_row(p.timed[0], RuntimeError("CUDA error: out of memory")))
    bs.summary(rows, pairs, p, args)
    assert "all outputs correct: False" in capsys.readouterr().out


def test_bench_scaling_chart(tmp_path):
    pytest.importorskip("matplotlib")
    bs = load_tool("bench_scaling")
    rows = [dict(g=g, m=m, n=64, k=128, x_floor=1.5, cublas_us=20.0, floor_us=10.0) for g in (1, 2) for m in (1, 2, 4)]
    pairs = [dict(g=2, m=m, n=64, k=128, ratio=1.2, floor_ratio=1.1) for m in (1, 2)]
    path = tmp_path / "scaling.png"
    bs.chart(str(path), rows, pairs, "a GPU")
    assert path.stat().st_size > 1000


def test_bench_serving_rotation_and_inputs():
    bs = load_tool("bench_serving")
    seen = []
    step = bs.rotation([lambda i=i: seen.append(i) for i in range(3)])
    for _ in range(7):
        step()
    assert seen == [0, 1, 2, 0, 1, 2, 0]
    gen = torch.Generator().manual_seed(1)
    packed, sf, sf_r = bs.nvfp4_operand(130, 128, gen, "cpu")
    assert packed.dtype == torch.float4_e2m1fn_x2 and packed.shape == (130, 64, 1) and packed.stride()[:2] == (64, 1)
    assert not (packed.view(torch.uint8) & 0b0100_0100).any()  # nibbles: sign + 2 low bits, as the task's
    assert set(sf.float().unique().tolist()) <= {1.0, 2.0}
    assert torch.equal(R.unreorder_scales(sf_r, 130).view(torch.uint8), sf[:, :, 0].view(torch.uint8))
    weights = [bs.nvfp4_operand(64, 128, gen, "cpu") for _ in range(2)]
    data = bs.task_input([3, 5], weights, 64, 128, gen, "cpu")
    assert fastlaunch.unpack(data) == 2 and [s[0] for s in data[3]] == [3, 5]
    other = [bs.nvfp4_operand(64, 128, gen, "cpu") for _ in range(2)]
    moved = bs.on_weights(data, other)
    assert fastlaunch.unpack(moved) == 2
    assert all(m[0] is d[0] and m[2] is d[2] and m[1] is o[0] for m, d, o in zip(moved[0], data[0], other))
    assert all(m[1] is o[2] for m, o in zip(moved[2], other))
    # the dequantised experts (the torch rows' weights) match the reference's dequantisation of each expert
    a, sfa, b, sfb, _m, _out = R.generate_masked_input(3, 8, 64, 128, 8, 2, device="cpu")
    full = bs.dequantised(b, sfb, 64, 3)
    plain = R.unblock_scales(sfb, 64)
    assert full.dtype == torch.bfloat16 and full.shape == (3, 64, 128)
    assert torch.equal(full[2].float(), R.dequantize(b[2], plain[2]))
    one = bs.dequantised(b, sfb, 64, 1)
    assert one.shape == (3, 64, 128) and torch.equal(one[2], full[0])


def test_bench_serving_blocks_rows_summary_and_chart(tmp_path, monkeypatch):
    bs = load_tool("bench_serving")
    # block choice on made-up sizes: the smallest block that holds the groups, the largest past it
    blocks = [("gemm", 16, 100), ("gemm", 64, 200), ("gemm", 256, 300), ("conversion", 16, 10), ("conversion", 64, 200),
              ("conversion", 256, 300)]
    assert [bs.block_bytes(blocks, "gemm", g) for g in (1, 16, 17, 64, 65, 256, 1000)] == [100, 100, 200, 200, 300,
                                                                                            300, 300]
    assert [bs.block_bytes(blocks, "conversion", g) for g in (8, 40)] == [10, 200]
    stats = {"median": 9000.0, "p10": 8000.0, "p90": 12000.0}
    cases = []
    for kind, key in (("task", "a"), ("masked", "e"), ("torch", "f")):
        c = bs.Case(key, f"{kind} row: G=8", kind, 8, f"{kind} G=8", [print, print])
        c.r.update(check="ok" if kind != "torch" else "-", kernels_per_call=2.0, host_ns=dict(stats), b2b_us=30.0,
                   graph_us=20.0, bare_ns=3000.0, bare2_ns=5000.0, bare_bytes=100)
        if kind == "task":
            c.r["c_loop_ns"] = {"median": 4000.0, "p10": 3900.0, "p90": 4100.0}
        cases.append(c)
    cases[2].r["host_ns"]["median"] = 27000.0
    cases.append(bs.Case("e", "masked row: G=64", "masked", 64, "masked G=64", [], counts=[0, 1], note="not built"))
    header = bs.header_row().splitlines()[0]
    for c in cases:
        cells = bs.row_cells(c)
        assert len(cells) == len(bs.COLUMNS) == header.count("|") - 1
    first = dict(zip(bs.COLUMNS, bs.row_cells(cases[0])))
    assert first["host us/call"] == "9.00" and first["C loop us"] == "4.00" and first["host/bare"] == "3.00"
    assert first["bare us (1 launch, GEMM block)"] == "3.00 (100 B)" and first["b2b/graph"] == "1.50"
    last = bs.row_cells(cases[3])
    assert "not built" in last[0] and last[1] == "2" and set(last[4:]) == {"-"}
    text = bs.summary(cases)
    assert "3.00-3.00x one bare launch" in text and "3.0x host" in text and "outputs checked: 2 of 2 ok" in text
    drawn = []

    class Plt:  # records what the chart draws, in place of matplotlib (absent on build machines)
        def subplots(self, **_kw):
            return self, self

        def __getattr__(self, name):
            return lambda *a, **kw: drawn.append((name, a, kw))
    monkeypatch.setattr(bs, "load_pyplot", lambda: Plt())
    bs.chart(cases, str(tmp_path / "c.png"), "title")
    bars = [a for name, a, _kw in drawn if name == "barh"]
    assert len(bars) == 3 and all(len(a[1]) == 3 for a in bars)
    assert ("savefig", (str(tmp_path / "c.png"),), {"dpi": 120}) in drawn


def test_bench_ext_parameter_blocks_and_bare_launch_arguments():
    bench = pytest.importorskip("fastlaunch._bench", reason="built with FASTLAUNCH_BUILD_BENCH=1 only")
    if not hasattr(bench, "param_blocks"):
        pytest.skip("fastlaunch._bench predates the bare-launch anchor")
    blocks = bench.param_blocks()
    gemm = sorted((g, b) for k, g, b in blocks if k == "gemm")
    conv = {g: b for k, g, b in blocks if k == "conversion"}
    assert gemm[-1][0] == fastlaunch._C.max_groups_per_launch
    assert all(b1 < b2 for (_g1, b1), (_g2, b2) in zip(gemm, gemm[1:])), gemm
    assert set(conv) == {g for g, _b in gemm} and conv[gemm[0][0]] < 1024  # the conversion's own small block
    assert all(conv[g] == b for g, b in gemm[1:])  # larger launches convert A on the GEMM's block
    with pytest.raises(RuntimeError, match="no empty kernel takes 12345 bytes"):
        bench.bare_launch_ns(12345, 1, 1)
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError):
            bench.bare_launch_ns(gemm[0][1], 1, 1)


def test_bench_scaling_reads_ncu_dram_bytes():
    # ncu --csv --page raw --print-units base: a header, a units row, then one row per kernel; its own ==PROF== lines
    bs = load_tool("bench_scaling")
    text = ("==PROF== Connected to process 1\n"
            '"ID","Process ID","Kernel Name","dram__bytes_read.sum","dram__bytes_write.sum"\n'
            '"","","","byte","byte"\n'
            '"0","1","convert_a_small","1,000","2000"\n'
            '"1","1","nvfp4_group_gemm","5000","250.5"\n'
            "==PROF== Disconnected from process 1\n")
    assert bs.parse_ncu_bytes(text) == (2, 8250.5)
    assert bs.parse_ncu_bytes("==ERROR== no kernels were profiled\n") == (0, 0.0)


# ============================================================================ tools/soak.py

class _Stream:
    def synchronize(self):
        pass


class _Graph:
    def __init__(self, call):
        self.replay = call


def _soak_worker(soak, kernel, masked_kernel, check_every=1):
    """A soak worker on the CPU: the kernels replaced by the reference (the bytes a kernel reads: A, B and the
    reordered scales) or by a broken one, no stream, no capture."""
    import threading
    import types
    args = soak.parse_args(["--seed", "7", "--check-every", str(check_every)])
    w = soak.Worker(0, args, soak.Stats(), threading.Event(), None, threading.Lock(), True)
    w.device, w.stream = "cpu", _Stream()
    w.fl = types.SimpleNamespace(fast_launch=kernel, _C=types.SimpleNamespace(grouped_mm_masked=masked_kernel))
    return w


def _good_task(data):
    return R.ref_kernel(R.scales_as_read(data))


def _good_masked(a, sfa, b, sfb, masked_m, out):
    ref = R.ref_masked(a, sfa, b, sfb, masked_m)
    for e, m in enumerate(masked_m.tolist()):
        out[e, :m] = ref[e, :m].to(out.dtype)


def test_soak_draws_stay_in_the_contract_and_the_budget():
    soak = load_tool("soak")
    rng = random.Random(3)
    for _ in range(500):
        g, ms, ns, ks = soak.draw_task(rng)
        assert len(ms) == len(ns) == len(ks) == g and all(k % 64 == 0 for k in ks) and min(ms) >= 0
        assert soak.task_bytes(ms, ns, ks) <= soak.BUDGET
        g, max_m, n, k, counts = soak.draw_masked(rng)
        assert n % 8 == 0 and k % 64 == 0 and len(counts) == g and all(0 <= c <= max_m for c in counts)
        assert soak.masked_bytes(g, max_m, n, k) <= soak.BUDGET
    args = soak.parse_args(["--minutes", "1"])
    assert args.warmup == 20.0 and args.forms == list(soak.FORMS) and args.seed is not None
    with pytest.raises(SystemExit):
        soak.parse_args(["--forms", "task,nonesuch"])


def test_soak_checks_find_right_and_wrong_outputs(monkeypatch):
    soak = load_tool("soak")
    monkeypatch.setattr(soak, "BUDGET", 1 << 20)  # small draws: the CPU reference is slow
    good = _soak_worker(soak, _good_task, _good_masked)
    for _ in range(3):
        assert good.task(True)[1] is None
        assert good.masked(True)[1] is None
    lazy = _soak_worker(soak, lambda data: [c for _a, _b, c in data[0]], lambda *args: None)  # writes nothing
    assert "differ" in lazy.task(True)[1]
    msg = None
    while msg is None:  # (a draw whose every masked_m is 0 has nothing to write)
        msg = lazy.masked(True)[1]
    assert "differ" in msg
    assert good.task(False)[1] is None and lazy.task(False)[1] is None  # unchecked calls: errors only


def test_soak_replays_check_the_bytes_copied_in(monkeypatch):
    soak = load_tool("soak")
    monkeypatch.setattr(soak, "BUDGET", 1 << 20)
    w = _soak_worker(soak, _good_task, _good_masked)
    g, ms, ns, ks = 3, [5, 0, 40], [128, 256, 72], [256, 64, 128]
    static = R.generate_input(ms, ns, ks, g, 1, device="cpu")
    w.graph = ["graph-task", _Graph(lambda: _good_task(static)), static, 3, {"g": g}]
    for _ in range(3):  # a replay reads the captured tensors, new data copied in
        assert w.replay("graph-task", True)[1] is None
    snapshot = R.generate_input(ms, ns, ks, g, 1, device="cpu")  # a replay that reads the data of the capture
    w.graph = ["graph-task", _Graph(lambda: [c.copy_(r) for (_a, _b, c), r in
                                             zip(static[0], _good_task(R.clone_outputs(snapshot)))]), static, 3, {}]
    assert "differ" in w.replay("graph-task", True)[1]
    a, sfa, b, sfb, mm, out = R.generate_masked_input(4, 16, 64, 128, [3, 0, 16, 9], 2, device="cpu")
    w.graph = ["graph-masked", _Graph(lambda: _good_masked(a, sfa, b, sfb, mm, out)), (a, sfa, b, sfb, mm, out), 5, {}]
    for _ in range(4):
        assert w.replay("graph-masked", True)[1] is None
    assert w.graph[3] == 1


def test_soak_run_pauses_counts_and_reports_on_the_cpu(monkeypatch, tmp_path, capsys):
    # the whole run (threads, pauses for the start and end readings, the table, the JSON) with the CUDA calls
    # stubbed and the kernels replaced by the reference on the CPU; one kernel goes wrong now and then
    import contextlib
    soak = load_tool("soak")
    monkeypatch.setattr(soak, "BUDGET", 1 << 18)
    monkeypatch.setattr(soak, "DEVICE", "cpu")
    for name, value in (("is_available", lambda: True), ("Stream", lambda *a, **k: _Stream()),
                        ("stream", lambda s: contextlib.nullcontext()), ("synchronize", lambda: None),
                        ("mem_get_info", lambda: (6 << 30, 8 << 30)), ("memory_allocated", lambda: 1 << 20),
                        ("memory_reserved", lambda: 2 << 20)):
        monkeypatch.setattr(torch.cuda, name, value)
    calls = [0]

    def sometimes_wrong(data):
        calls[0] += 1
        out = _good_task(data)
        if calls[0] % 7 == 0:
            out[0].fill_(1.0) if out[0].numel() else None
        return out
    monkeypatch.setattr(fastlaunch, "fast_launch", sometimes_wrong)
    monkeypatch.setattr(fastlaunch._C, "grouped_mm_masked", _good_masked, raising=False)
    out = tmp_path / "soak.json"
    rc = soak.main(["--minutes", "0.05", "--warmup", "0.5", "--threads", "2", "--check-every", "1",
                    "--sample-every", "0.2", "--forms", "task,masked", "--seed", "11", "--hang", "60",
                    "--json", str(out)])
    text = capsys.readouterr().out
    got = json.loads(out.read_text())
    assert got["start"]["quiesced"] and got["end"]["quiesced"] and got["growth"]["device_used"] == 0
    assert got["calls"]["task"] > 0 and got["calls"]["masked"] > 0 and got["checked"]["task"] == got["calls"]["task"]
    assert got["errors"] == {f: 0 for f in soak.FORMS} and not got["hung"]
    wrong = got["mismatches"]["task"]
    assert (rc == 1 and wrong and not got["ok"]) or (rc == 0 and not wrong and got["ok"]), (rc, got)
    assert "| task |" in text and "| host VmRSS |" in text and text.startswith("soak: seed 11")
