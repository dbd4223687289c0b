"""The `theorylab` command on temporary registries: exit codes, report files, error rows."""

import dataclasses
import json

import pytest

from paper_checks import Registry, claim, measure, memo, patch, prop, record, sizes, within
from theorylab._cli import main

OFFSET = 0.0  # the "library constant" the demo claims exercise; their mutant changes it
SIZES = sizes(smoke=dict(n=1), quick=dict(n=2), full=dict(n=3))


BOUND = 1.0  # the "bound's constant" of the demo property; its mutant lowers it


@pytest.fixture
def properties():
    reg = Registry()

    @prop(
        "demo.square",
        paper="Demo",
        statement="x^2 <= BOUND * |x| on [-1, 1]",
        where="Eq. (3)",
        strategy=lambda st: st.fixed_dictionaries({"x": st.floats(-1.0, 1.0)}),
        mutants=[patch(f"{__name__}.BOUND", 0.5, "constant halved", name="half")],
        registry=reg,
    )
    def _square(ex):
        return BOUND * abs(ex["x"]) - ex["x"] ** 2

    return reg


@pytest.fixture
def registry():
    reg = Registry()

    @claim(
        "demo.true",
        paper="Demo",
        statement="1 + 1 = 2",
        where="Eq. (1)",
        sizes=SIZES,
        mutants=[patch(f"{__name__}.OFFSET", 0.5, "sum off by 0.5", name="offset")],
        registry=reg,
    )
    def _true(size, seed):
        return measure(
            within(1.0 + 1.0 + OFFSET, 2.0, 0.1, name="sum"), detail=f"n={size.n}, seed={seed}"
        )

    @claim("demo.false", paper="Demo", statement="1 + 1 = 3", where="Eq. (2)", registry=reg)
    def _false(size, seed):
        return measure(within(1.0 + 1.0, 3.0, 0.1, name="sum"))

    @claim("other.raises", paper="Demo", statement="raises", where="-", registry=reg)
    def _raises(size, seed):
        raise RuntimeError("boom")

    return reg


def test_false_claim_fails_run_and_is_reported(registry, tmp_path):
    code = main(["reproduce", "--out", str(tmp_path)], registry=registry, figures_package=None)
    assert code == 1
    report = json.loads((tmp_path / "report.json").read_text())
    h = report["header"]
    assert (h["scale"], h["seed"], h["partial"]) == ("quick", 0, False)
    assert h["peak_rss_mb"] > 0 and h["wall_seconds"] >= 0 and h["version"]
    assert set(h["areas"]) == {"demo", "other"}  # each area's time and memory at its end
    assert all(0 < a["peak_rss_mb"] <= h["peak_rss_mb"] for a in h["areas"].values())
    assert "per area (wall s" in (tmp_path / "report.md").read_text()
    rows = {r["id"]: r for r in report["claims"]}
    assert rows["demo.true"]["status"] == "reproduced" and rows["demo.true"]["matches"]
    assert (
        rows["demo.false"]["status"] == "not reproduced" and rows["demo.false"]["measured"] == 2.0
    )
    assert rows["demo.false"]["recorded"] == "reproduced" and not rows["demo.false"]["matches"]
    assert rows["demo.false"]["rule"].startswith("|sum - expected| <= tol")
    assert rows["other.raises"]["status"] == "error" and "boom" in rows["other.raises"]["detail"]
    assert rows["demo.true"]["mutants"] == 1 and rows["demo.true"]["killed"] is None
    assert rows["demo.true"]["mutant_measured"] is None
    md = (tmp_path / "report.md").read_text()
    assert "| `demo.false` | **not reproduced** |" in md
    assert md.splitlines()[0].startswith("# theorylab report — 3 claims: 1 reproduced")


def test_a_run_matching_its_recorded_outcomes_exits_0_and_a_change_exits_1(tmp_path):
    """Recorded outcomes as pytest's expected failures: a recorded 'not reproduced' that stays so
    is no failure of the run; the same claim reproducing is a change, and exits 1."""
    reg = Registry()

    @claim(
        "demo.recorded",
        paper="Demo",
        statement="1 + 1 = 3",
        where="Eq. (2)",
        recorded=record(quick="not reproduced", reason="arithmetic"),
        registry=reg,
    )
    def _recorded(size, seed):
        return measure(within(1.0 + 1.0 + OFFSET, 3.0, 0.1, name="sum"))

    assert main(["reproduce", "--out", str(tmp_path)], registry=reg, figures_package=None) == 0
    row = json.loads((tmp_path / "report.json").read_text())["claims"][0]
    assert (row["status"], row["recorded"], row["matches"]) == (
        "not reproduced",
        "not reproduced",
        True,
    )
    assert row["reason"] == "arithmetic"
    global OFFSET
    OFFSET = 1.0
    try:
        assert main(["check", "demo.recorded"], registry=reg) == 1  # it now reproduces
    finally:
        OFFSET = 0.0


def test_only_glob_and_passing_run(registry, tmp_path):
    code = main(
        ["reproduce", "--only", "demo.t*", "--out", str(tmp_path)],
        registry=registry,
        figures_package=None,
    )
    assert code == 0
    claims = json.loads((tmp_path / "report.json").read_text())["claims"]
    assert [r["id"] for r in claims] == ["demo.true"]


def test_mutants_are_run_and_counted(registry, tmp_path, capsys):
    code = main(
        ["reproduce", "--only", "demo.t*", "--mutants", "--out", str(tmp_path)],
        registry=registry,
        figures_package=None,
    )
    assert code == 0
    row = json.loads((tmp_path / "report.json").read_text())["claims"][0]
    assert (row["killed"], row["mutants"], row["mutant_runs"]) == (
        1,
        1,
        {"offset": "not reproduced"},
    )
    under = row["mutant_measured"]["offset"]  # what the mutant changed: 2.0 -> 2.5
    assert (row["measured"], under["measured"]) == (2.0, 2.5) and "= 5)" in under["rule"]
    assert OFFSET == 0.0  # the patch is undone
    assert main(["check", "demo.true", "--mutant", "offset"], registry=registry) == 1
    assert "sum off by 0.5" in capsys.readouterr().out


def test_seed_and_scale_reach_the_check(registry, capsys):
    assert main(["check", "demo.true", "--seed", "7", "--scale", "smoke"], registry=registry) == 0
    assert "n=1, seed=7" in capsys.readouterr().out


def test_check_one_claim(registry, capsys):
    assert main(["check", "demo.true"], registry=registry) == 0
    assert main(["check", "demo.false"], registry=registry) == 1
    assert "demo.false" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [
        ["check", "no.such"],
        ["reproduce", "--scale", "huge"],
        ["frobnicate"],
        ["reproduce", "--only", "zzz.*"],
        ["reproduce", "--only", ""],
        ["verify", "--only", ""],
        ["check", "demo.true", "--mutant", "nope"],
        ["check", "demo.true", "--seed", "-1"],
        ["reproduce", "--seed", "x"],
        ["check", "demo.true", "--out", __file__],
        ["check", "demo.true", "--out", "/proc/no/such/folder"],
        ["verify", "--examples", "0"],
        ["verify", "--mutant", "half"],
        ["verify", "--only", "demo.square", "--mutant", "nope"],
        ["reproduce", "--workers", "0"],
        ["reproduce", "--threads", "0"],
        ["check", "demo.true", "--threads", "x"],
        ["reproduce", "--workers", "2", "--scheduler", "tcp://x:1"],
        ["reproduce", "--scheduler", ""],
    ],
)
def test_bad_command_line_prints_one_line_and_exits_2(registry, properties, capsys, argv):
    assert main(argv, registry=registry, properties=properties, figures_package=None) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("theorylab: error:")


def test_list(registry, properties, capsys):
    assert main(["list"], registry=registry, properties=properties) == 0
    out = capsys.readouterr().out
    assert "demo.true" in out and "other.raises" in out and "demo.square" in out


def test_registry_rejects_bad_and_duplicate_ids():
    reg = Registry()
    claim("a.b", paper="p", statement="s", where="w", registry=reg)(lambda z, s: None)
    with pytest.raises(ValueError, match="twice"):
        claim("a.b", paper="p", statement="s", where="w", registry=reg)(lambda z, s: None)
    with pytest.raises(ValueError, match="AREA.NAME"):
        claim("nodot", paper="p", statement="s", where="w", registry=reg)(lambda z, s: None)
    with pytest.raises(ValueError, match="scales"):
        sizes(quick={}, full={})


def test_figures_written_as_png_and_pdf_and_errors_reported(registry, tmp_path, monkeypatch):
    pkg = tmp_path / "demo_figures"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "ok.py").write_text(
        "import matplotlib.pyplot as plt\nID = 'demo.true'\nTITLE = 't'\n"
        "def make(scale, seed=0):\n    fig, ax = plt.subplots()\n    ax.plot([0, 1])\n"
        "    return fig\n"
    )
    (pkg / "bad.py").write_text(
        "ID = 'demo.bad'\nTITLE = 't'\ndef make(scale, seed=0):\n    raise ValueError('no data')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "out"
    code = main(
        ["reproduce", "--only", "demo.t*", "--out", str(out)],
        registry=registry,
        figures_package="demo_figures",
    )
    assert code == 0  # the failing figure is not selected by the glob
    assert (out / "demo_true.png").stat().st_size > 0 and (out / "demo_true.pdf").stat().st_size > 0
    code = main(
        ["reproduce", "--only", "demo.*", "--out", str(out)],
        registry=registry,
        figures_package="demo_figures",
    )
    assert code == 1
    assert "`demo.bad`: error: ValueError: no data" in (out / "report.md").read_text()


def test_interrupted_run_leaves_a_partial_report(registry, tmp_path):
    @claim("zz.interrupt", paper="p", statement="s", where="w", registry=registry)
    def _interrupt(size, seed):
        raise KeyboardInterrupt

    code = main(["reproduce", "--out", str(tmp_path)], registry=registry, figures_package=None)
    assert code == 130
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["header"]["partial"] is True
    assert [r["id"] for r in report["claims"]] == ["demo.true", "demo.false", "other.raises"]
    assert "PARTIAL" in (tmp_path / "report.md").read_text()


def test_verify_reports_holds_and_finds_and_shrinks_a_planted_bug(properties, tmp_path, capsys):
    argv = ["verify", "--examples", "50", "--no-db", "--out", str(tmp_path)]
    assert main(argv, properties=properties) == 0
    row = json.loads((tmp_path / "verify.json").read_text())["properties"][0]
    assert row["status"] == "holds" and row["examples"] == 50 and row["min_slack"] >= 0
    # the planted bug (the constant lowered to 0.5) is found, and shrunk to a simple instance
    argv += ["--only", "demo.square", "--mutant", "half"]
    assert main(argv, properties=properties) == 1
    row = json.loads((tmp_path / "verify.json").read_text())["properties"][0]
    x = row["counterexample"]["x"]
    assert row["status"] == "counterexample" and 0.5 < abs(x) <= 1.0 and x in (1.0, -1.0)
    assert "--replay" in capsys.readouterr().out
    # the blob replays the same instance; without the bug it holds
    assert (
        main(["verify", "--only", "demo.square", "--replay", row["blob"]], properties=properties)
        == 0
    )
    assert "slack 0 at {'x': " in capsys.readouterr().out
    assert (
        main(["verify", "--only", "demo.square", "--replay", "not-a-blob"], properties=properties)
        == 2
    )


def test_reproduce_on_two_dask_workers_gives_the_serial_report(tmp_path):
    pytest.importorskip("dask.distributed", reason="the test extra installs dask[distributed]")

    def report(extra):
        out = tmp_path / ("parallel" if extra else "serial")
        assert (
            main(["reproduce", "--scale", "smoke", "--only", "rmt.*", "--out", str(out), *extra])
            == 0
        )
        body = json.loads((out / "report.json").read_text())
        body.pop("header")  # wall time, memory and workers differ, as they must
        for r in body["claims"] + body["figures"]:
            r.pop("seconds")
        return body, sorted(p.name for p in out.iterdir())

    assert report([]) == report(["--workers", "2"])


def _chunked_registry():
    from paper_checks import REGISTRY

    reg = Registry()
    for c in REGISTRY:
        if c.replicates is not None:
            reg.add(c)
    return reg


@pytest.mark.slow
def test_chunked_claims_and_their_mutants_on_two_dask_workers_give_the_serial_rows(tmp_path):
    """The claims that declare replicates run as chunks of them on the cluster (their mutants'
    chunks too, under the mutant), or on two threads of one process, and report what the serial
    run reports."""
    pytest.importorskip("dask.distributed", reason="the test extra installs dask[distributed]")
    reg = _chunked_registry()
    assert {"rmt.bbp", "spectral.phase_transition", "ecc.debiasing"} <= {c.id for c in reg}

    def untimed(x):  # wall times (the row's, d2sa.efficiency's per method) differ run to run
        if isinstance(x, dict):
            return {k: untimed(v) for k, v in x.items() if k != "seconds"}
        return [untimed(v) for v in x] if isinstance(x, list) else x

    def rows(extra):
        out = tmp_path / "-".join(extra)
        argv = ["reproduce", "--scale", "smoke", "--mutants", "--out", str(out), *extra]
        main(argv, registry=reg, figures_package=None)
        return untimed(json.loads((out / "report.json").read_text())["claims"])

    serial = rows(["--threads", "1"])
    assert all(r["status"] != "error" and r["killed"] is not None for r in serial), serial
    assert serial == rows(["--workers", "2"])
    assert serial == rows(["--threads", "2"])


class _Client:
    """Records what is submitted; a future is the key it was submitted under."""

    def __init__(self):
        self.submitted = {}

    def submit(self, fn, *args, key=None, pure=True, **kwargs):
        key = key or f"{fn.__name__}-{len(self.submitted)}"
        self.submitted.setdefault(key, (fn, args, kwargs))
        return key


def test_a_claim_with_replicates_is_submitted_as_chunks_shared_unless_mutated():
    from paper_checks import REGISTRY
    from theorylab._tasks import _submit, claim_row, replicate_chunk

    client = _Client()
    deb, cov = REGISTRY["ecc.debiasing"], REGISTRY["ecc.coverage"]
    row = _submit(client, (claim_row, (deb, "quick", 0), dict(mutants=True)), False, slots=2)
    _submit(client, (claim_row, (cov, "quick", 0), dict(mutants=False)), False, slots=2)
    chunks = {k: v for k, v in client.submitted.items() if v[0] is replicate_chunk}
    rows = [v for v in client.submitted.values() if v[0] is claim_row]
    assert len(rows) == 2 and client.submitted[row][2]["chunks"].keys() == {
        None,
        *(m.name for m in deb.mutants),
    }
    # quick: (2, 250) and (3, 250) x 300 reps, (2, 1000) and (3, 1000) x 20 reps; four chunks
    # each (count / (2 slots)), for the run and each of 3 mutants; coverage's own (2, 250) and
    # (3, 250) chunks are debiasing's unmutated ones
    assert len(chunks) == 4 * 4 * (1 + len(deb.mutants))
    plan = deb.replicate_plan("quick", 0)
    for reps, keys in client.submitted[row][2]["chunks"][None]:
        spans = [chunks[k][1][1:3] for k in keys]
        assert spans[0][0] == 0 and spans[-1][1] == reps.count
        assert all(a[1] == b[0] for a, b in zip(spans, spans[1:], strict=False))
        assert all(chunks[k][1][0] == reps and chunks[k][1][3] is None for k in keys)
    assert [r for r, _ in client.submitted[row][2]["chunks"][None]] == plan
    for name, per in client.submitted[row][2]["chunks"].items():
        if name is not None:
            assert all(chunks[k][1][3] is deb.mutant(name) for _, keys in per for k in keys)


def test_a_claim_whose_replicate_declaration_raises_is_submitted_whole(registry):
    from theorylab._tasks import _submit, claim_row

    broken = dataclasses.replace(registry["demo.true"], replicates=lambda size, seed: 1 / 0)
    client = _Client()
    _submit(client, (claim_row, (broken, "smoke", 0), {}), False, slots=2)
    [(fn, args, kwargs)] = client.submitted.values()
    assert fn is claim_row and "chunks" not in kwargs


def test_a_figure_that_declares_replicates_shares_the_claims_chunks():
    import figures.d2sa_shifts as fig
    from paper_checks import REGISTRY
    from theorylab._tasks import _submit, claim_row, figure_row

    client = _Client()
    row = _submit(client, (claim_row, (REGISTRY["d2sa.efficiency"], "quick", 0), {}), False, 2)
    before = set(client.submitted)
    job = (figure_row, (fig.__name__, fig.ID, "quick", 0, "out"), {})
    task = _submit(client, job, False, slots=2)
    assert set(client.submitted) == before | {task}  # no chunk of its own: the claim's
    assert client.submitted[task][2]["chunks"] == client.submitted[row][2]["chunks"][None]


def _never(x):
    raise AssertionError("computed although provided")


def test_a_figure_reads_its_provided_replicates(tmp_path, monkeypatch):
    from paper_checks import unit
    from theorylab._tasks import figure_row

    pkg = tmp_path / "given_figures"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "given.py").write_text(
        "import matplotlib.pyplot as plt\nfrom paper_checks import computed\n"
        f"from {__name__} import _never\nID = 'demo.given'\nTITLE = 't'\n"
        "def make(scale, seed=0):\n    fig, ax = plt.subplots()\n"
        "    ax.plot([0, computed(_never, 1)])\n    return fig\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    chunk = dict(results=[3.0], error=None, seconds=0.0)

    def row(*chunks):
        given = [(unit(_never, 1), list(chunks))] if chunks else None
        return figure_row(
            "given_figures.given", "demo.given", "smoke", 0, str(tmp_path), chunks=given
        )

    fid, status, paths, seconds = row(chunk)
    assert (fid, status, len(paths)) == ("demo.given", "written", 2) and seconds > 0
    assert row(dict(chunk, results=None, error="RuntimeError: chunk"))[1] == (
        "error: RuntimeError: chunk"
    )
    _, status, *_ = row()
    assert status.startswith("error: AssertionError: computed although provided")


def _source(x):
    return 100.0 + x  # computed where no result is handed over


def _adapted(x):
    from paper_checks import shared

    return shared(_source, x) + 1.0


def test_a_unit_reads_the_need_handed_to_it_and_computes_one_that_failed():
    from paper_checks import unit
    from theorylab._tasks import replicate_chunk

    need = unit(_source, 2)
    reps = unit(_adapted, 2, needs=[need])
    ok = dict(results=[40.0], error=None, seconds=0.0)
    assert replicate_chunk(reps, 0, 1, given=[(need, ok)])["results"] == [41.0]
    failed = dict(results=None, error="RuntimeError: need", seconds=0.0)
    assert replicate_chunk(reps, 0, 1, given=[(need, failed)])["results"] == [103.0]
    assert reps.run() == [103.0]  # serially: computed here
    with pytest.raises(TypeError, match="`needs` must hold units"):
        unit(_adapted, 2, needs=[_source])


def test_units_that_share_a_source_model_share_one_task_for_it():
    from _core.streams import substream_seed
    from paper_checks import REGISTRY
    from paper_checks.acavp import source_model
    from theorylab._tasks import _submit, claim_row, replicate_chunk

    client = _Client()
    rob, over = REGISTRY["acavp.robustness"], REGISTRY["acavp.overfitting_grows"]
    row = _submit(client, (claim_row, (rob, "quick", 3), dict(mutants=True)), False, slots=2)
    _submit(client, (claim_row, (over, "quick", 3), {}), False, slots=2)
    tasks = [v for v in client.submitted.values() if v[0] is replicate_chunk]
    sources = {
        (args[0].args[1], args[3]) for _, args, _ in tasks if args[0].args[0] is source_model
    }
    # 8 sources (run seeds: the spawned children j = 0..7 of seed 3), once for both claims,
    # once more under each mutant
    size = rob.sizes["quick"]
    want = {(size.pretrain, substream_seed(3, j)) for j in range(8)}
    assert {a for (a, m) in sources if m is None} == want
    assert len(sources) == 8 * (1 + len(rob.mutants))
    for run, per in client.submitted[row][2]["chunks"].items():
        for reps, keys in per:
            for k in keys:
                [(need, key)] = client.submitted[k][2]["given"]
                assert need == reps.needs[0] and need.args == (
                    source_model,
                    (size.pretrain, reps.args[1][7]),
                )
                assert client.submitted[key][1][0] == need
                assert client.submitted[key][1][3] is (None if run is None else rob.mutant(run))


@memo
def _simulation(x):
    return [x] * 10


def _task_under_share(share):
    """A task that memoises a simulation, then relieves memory at ``share``."""
    from theorylab._tasks import relieve_memory

    _simulation(1)
    return relieve_memory(share), _simulation.cache_info().currsize


def test_a_worker_past_its_memory_share_drops_its_memoised_simulations():
    pytest.importorskip("dask.distributed", reason="the test extra installs dask[distributed]")
    from dask.distributed import Client, LocalCluster

    from theorylab._tasks import relieve_memory

    assert relieve_memory(0.0) is False  # not on a worker: nothing to relieve
    with (
        LocalCluster(n_workers=1, processes=False, threads_per_worker=1, dashboard_address=":0")
        as cluster,
        Client(cluster) as client,
    ):  # fmt: skip
        assert client.submit(_task_under_share, 1e9, pure=False).result() == (False, 1)
        assert client.submit(_task_under_share, 0.0, pure=False).result() == (True, 0)


def test_area_peak_is_its_own():
    """An area's sampled peak sees a transient allocation; the next area's does not, while the
    process's peak (what ``/usr/bin/time`` reads) is never reset."""
    import time

    import numpy as np

    from theorylab import _tasks

    peak = _tasks.AreaPeak(interval=0.01)
    if _tasks._rss_mb() is None:
        pytest.skip("no /proc/self/statm here")
    try:
        base = peak.take()
        big = np.ones(400 * 2**20 // 8)  # 400 MB touched
        time.sleep(0.1)
        del big
        _tasks._release_area()
        first = peak.take()
        time.sleep(0.1)
        second = peak.take()
    finally:
        peak.close()
    assert first > base + 300 and second < first - 300
    assert _tasks.peak_rss_mb() >= first - 1
