"""benchmarks/run_all.py: the summary table it builds from the scripts' figures (no benchmark runs here)."""

import json

from tests.helpers.benchmarks import BENCHMARKS, load_benchmark

run_all = load_benchmark("run_all")


def _figure(case, metric, ours, reference, unit="s"):
    return {"title": "t", "case": case, "metric": metric, "ours": ours, "reference": reference, "unit": unit}


def test_rows_take_the_min_and_pair_the_floor_with_its_case():
    bench = run_all.Bench("bench_scan.py", (), (), goal=0.9, floor_goal=1.2)
    rows = run_all._rows(bench, [
        _figure("scan 5M", "wall min", 1.0, 2.0), _figure("scan 5M", "wall median", 1.1, 2.1),
        _figure("scan 5M (plain spark)", "wall min", 1.0, 0.5), _figure("scan 5M", "JVM peak RSS", 700, 600, "MiB"),
        _figure("scan 1M", "wall min", 0.3, 0.6),
    ])
    assert [(r.case, r.ours, r.reference, r.floor) for r in rows] == [("scan 5M", 1.0, 2.0, 0.5), ("scan 1M", 0.3, 0.6, None)]
    # 0.5x Java meets 0.9x, but twice the floor misses 1.2x
    assert [r.met for r in rows] == ["NO", "yes"]


def test_the_hand_over_figure_is_a_row_of_its_own_that_no_goal_judges():
    bench = run_all.Bench("bench_scan.py", (), (), goal=0.9, floor_goal=1.2)
    rows = run_all._rows(bench, [
        _figure("scan 20M", "wall min", 1.5, 1.0), _figure("scan 20M (hand-over)", "wall min", 1.5, 0.95),
    ])
    assert [(r.case, r.reference, r.reference_name, r.met) for r in rows] == [
        ("scan 20M", 1.0, "Java", "NO"), ("scan 20M (hand-over)", 0.95, "hand-over", "-")]


def test_figures_recorded_again_in_a_final_table_give_one_row():
    bench = run_all.Bench("bench_data_scale.py", (), (), goal=1.0)
    progress = [_figure("binpack", "wall min", 1.0, 2.0), _figure("sort", "wall min", 3.0, 4.0)]
    rows = run_all._rows(bench, progress + [_figure("binpack", "wall min", 1.0, 2.0), _figure("sort", "wall min", 3.0, 4.0)])
    assert [(r.case, r.ours) for r in rows] == [("binpack", 1.0), ("sort", 3.0)]


def test_a_goal_of_none_shows_the_figure_without_judging_it():
    bench = run_all.Bench("bench_avro_codecs.py", (), (), goal=None, reference="fastavro")
    (row,) = run_all._rows(bench, [_figure("deflate", "compress min", 2.0, 1.0)])
    assert (row.case, row.ratio, row.met) == ("deflate compress", 2.0, "-")
    assert "NO" not in run_all.render([row], {})


def test_every_script_of_the_folder_is_in_the_list():
    scripts = {p.name for p in BENCHMARKS.glob("bench_*.py")}
    assert scripts == {b.script for b in run_all.BENCHES}


def test_a_script_that_fails_is_reported_and_the_run_fails(tmp_path, monkeypatch):
    failing = run_all.Bench("bench_x.py", (), (), goal=1.0)
    monkeypatch.setattr(run_all, "BENCHES", (failing,))
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    (tmp_path / "bench_x.py").write_text("import sys\nprint('boom', file=sys.stderr)\nsys.exit(3)\n")
    assert run_all.main([]) == 1


def test_figures_reach_the_table_through_the_environment(tmp_path, monkeypatch, capsys):
    script = tmp_path / "bench_y.py"
    script.write_text(
        "import json, os\n"
        "with open(os.environ['BENCH_FIGURES'], 'a') as out:\n"
        f"    out.write(json.dumps({json.dumps(_figure('case a', 'wall min', 1.0, 2.0))}) + '\\n')\n")
    monkeypatch.setattr(run_all, "BENCHES", (run_all.Bench("bench_y.py", (), (), goal=0.9),))
    monkeypatch.setattr(run_all, "HERE", tmp_path)
    assert run_all.main([]) == 0
    out = capsys.readouterr().out
    assert "bench_y: case a" in out and "0.50x" in out and "yes" in out
