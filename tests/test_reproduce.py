"""Reproduction mode (``SimConfig.reproduction``) and the reproduction scripts' command lines.

Fast tests: each mode zeroes exactly the effects its paper's simulator lacks in the simulator
that is built (rates and restart delays measured on a crafted run), it reaches the policies, it
composes from Hydra (``sim.reproduction=...``), and bad input fails in one line (exit 2 from the
scripts). The slow test runs a short Gavel stream and checks the ratio docs/reproduction_gavel.md
states for it.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import make_cluster, make_tm, make_workload

from hetsched.evaluation import run_one
from hetsched.resources import CONF_DIR
from hetsched.sim.allocation import Allocation
from hetsched.sim.engine import SimConfig, Simulator
from hetsched.sim.errors import HetschedError
from hetsched.sim.faults import CheckpointPolicy, FailureSpec
from hetsched.sim.throughput import REPRODUCTION

ROOT = Path(__file__).resolve().parent.parent
GAVEL = runpy.run_path(str(ROOT / "scripts" / "reproduce_gavel.py"))

#: The slow test's command and the ratio docs/reproduction_gavel.md states for it.
SHORT_ARGS = [
    "--rates", "5.6", "--seeds", "0", "--jobs", "400", "--window", "100", "200",
    "--schedulers", "gavel_agnostic", "gavel",
]  # fmt: skip
SHORT_RATIO = 1.43


def _two_jobs_one_node(
    mode: str | None, *, node_iota: float = 0.1, restart_s: float = 60.0
) -> Simulator:
    """Two 1-GPU jobs side by side on one 4-GPU node; returns the simulator."""
    tm = make_tm(node_iota=node_iota, restart_s=restart_s)
    cl = make_cluster([{"gpu_type": "v100", "count": 2, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    wl = make_workload([0.0, 0.0], [1e6, 1e6], [1, 1])
    return Simulator(cl, wl, tm, SimConfig(round_s=100.0, reproduction=mode))


def _progress_per_round(sim: Simulator, alloc: Allocation) -> np.ndarray:
    before = sim.remaining.copy()
    sim.advance(alloc)
    return before - sim.remaining


@pytest.mark.parametrize("mode", [None, *sorted(REPRODUCTION)])
def test_mode_zeroes_exactly_its_effects_in_the_built_simulator(mode: str | None) -> None:
    sim = _two_jobs_one_node(mode)
    off = REPRODUCTION.get(mode, frozenset()) if mode else frozenset()
    assert sim.tm.node_iota == (0.0 if "node_iota" in off else 0.1)
    assert np.all(sim.tm.restart_delay_s == (0.0 if "restart_delay" in off else 60.0))
    # A 2-GPU gang on two nodes: the packed rate (2/s) or make_tm's spread rate (half of it).
    spread = sim.tm.isolated(0, sim.cluster.node_type[0], 2, True)
    assert spread == (2.0 if "spread" in off else 1.0)
    # Measured: two co-located jobs progress at the isolated rate (1 step/s) or 10 % slower.
    same_node = Allocation.from_entries([(0, 0, 1, 4.0, 16.0), (1, 0, 1, 4.0, 16.0)])
    done = _progress_per_round(sim, same_node)
    keep = 1.0 if "node_iota" in off else 0.9
    np.testing.assert_allclose(done, 100.0 * keep)
    # Measured: moving job 0 to the other node costs its restart delay (or nothing).
    moved = Allocation.from_entries([(0, 1, 1, 4.0, 16.0), (1, 0, 1, 4.0, 16.0)])
    done = _progress_per_round(sim, moved)
    lost = 0.0 if "restart_delay" in off else 60.0
    np.testing.assert_allclose(done[0], 100.0 - lost)
    np.testing.assert_allclose(done[1], 100.0)  # alone on its node now, not moved


def test_every_mode_turns_node_slowdown_off_and_gavel_restarts() -> None:
    assert all("node_iota" in off for off in REPRODUCTION.values())
    assert "restart_delay" in REPRODUCTION["gavel"]
    assert "spread" in REPRODUCTION["gavel"]  # Gavel's simulator reads consolidated throughputs
    assert not {"restart_delay", "spread"} & REPRODUCTION["sia"]  # Sia's simulator has both


def test_policies_see_the_reproduction_model() -> None:
    seen: list[Any] = []

    class Idle:
        def reset(self, cluster: Any, workload: Any, throughput: Any, rng: Any) -> None:
            seen.append(throughput)

        def decide(self, state: Any) -> Allocation:
            seen.append(state.throughput)
            return Allocation.from_entries([(0, 0, 1, 4.0, 16.0)])

    cl = make_cluster([{"gpu_type": "v100", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    wl = make_workload([0.0], [50.0], [1])
    tm = make_tm(node_iota=0.1, restart_s=60.0)
    run_one(
        Idle(), name="idle", cluster=cl, workload=wl, throughput=tm,
        sim_config=SimConfig(round_s=100.0, reproduction="gavel"), seed=0,
        rng=np.random.default_rng(0),
    )  # fmt: skip
    assert len(seen) >= 2
    assert all(t.node_iota == 0.0 and not t.restart_delay_s.any() for t in seen)


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (SimConfig(reproduction="gavle"), "reproduction='gavle' is unknown"),
        (SimConfig(reproduction="gavel", failures=FailureSpec(mtbf_h=10.0)), "failures"),
        (SimConfig(reproduction="sia", checkpoint=CheckpointPolicy(interval_s=60.0)), "checkpoint"),
    ],
)
def test_bad_reproduction_settings_fail_in_one_line(config: SimConfig, match: str) -> None:
    cl = make_cluster([{"gpu_type": "v100", "count": 1, "gpus": 4, "cpus": 32, "mem_gib": 128}])
    with pytest.raises(HetschedError, match=match) as err:
        Simulator(cl, make_workload([0.0], [1.0], [1]), make_tm(), config)
    assert "\n" not in str(err.value)


def test_hydra_switch_builds_the_mode() -> None:
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from hetsched.config import register_configs, sim_config_from

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        on = compose("evaluate", overrides=["sim.reproduction=gavel"])
        off = compose("evaluate")
    assert sim_config_from(on.sim).reproduction == "gavel"
    assert sim_config_from(off.sim).reproduction is None


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--jobs", "2"], "--jobs=2"),
        (["--jobs", "10", "--window", "5", "20"], "--window 5 20"),
        (["--rates", "0"], "--rates"),
        (["--max-hours", "-1"], "--max-hours"),
        (["--paper", "--jobs", "100"], "--paper sets --jobs"),
        (["--effects", "gpu_melt"], "--effects"),
        (["--blocks", "0"], "--blocks"),
        (["--schedulers", "gavel", "gavel"], "named twice"),
    ],
)
def test_gavel_script_argument_errors_exit_2(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        GAVEL["main"](argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert needle in err[-1]  # argparse: usage line(s), then the one-line message


def test_paper_preset_is_the_papers_measurement() -> None:
    args = GAVEL["parse_args"](["--paper"])
    assert args.rates == [5.6] and args.seeds == [0] and args.window == (4000, 5000)
    assert set(args.schedulers) == {"gavel", "gavel_agnostic"}
    # Arrivals at 5.6 jobs/h continue far past the window's last arrival (~893 h).
    assert args.jobs / 5.6 > 2 * 5000 / 5.6


def test_effects_setup_turns_named_effects_back_on() -> None:
    tm = make_tm(node_iota=0.1, restart_s=60.0)
    same, cfg = GAVEL["effect_setup"](tm, [])
    assert same is tm and cfg.reproduction == "gavel"
    t, cfg = GAVEL["effect_setup"](tm, ["node_iota"])
    assert cfg.reproduction is None and t.node_iota == 0.1 and not t.restart_delay_s.any()
    t, cfg = GAVEL["effect_setup"](tm, ["restart_delay"])
    assert t.node_iota == 0.0 and np.all(t.restart_delay_s == 60.0)
    assert np.array_equal(t.tput[..., 1], t.tput[..., 0])  # spread penalty off
    t, cfg = GAVEL["effect_setup"](tm, ["spread"])
    assert np.array_equal(t.tput, tm.tput) and t.node_iota == 0.0


def test_early_stop_leaves_the_window_unchanged() -> None:
    from hetsched.baselines.heuristics import LAS

    rng = np.random.default_rng(3)
    J = 30
    wl = make_workload(
        np.sort(rng.uniform(0, 5000, J)).tolist(), rng.uniform(500, 8000, J).tolist(), [1] * J
    )
    cl = make_cluster([{"gpu_type": "v100", "count": 1, "gpus": 2, "cpus": 32, "mem_gib": 128}])
    tm = make_tm(node_iota=0.1)
    cfg = SimConfig(round_s=360.0, reproduction="gavel")
    early, full = (
        GAVEL["run_window"](
            LAS(round_s=360.0),
            cluster=cl,
            workload=wl,
            throughput=tm,
            sim_config=cfg,
            seed=0,
            rng=np.random.default_rng(1),
            window=(5, 12),
            early_stop=stop,
        )  # fmt: skip
        for stop in (True, False)
    )
    assert np.isfinite(full.finish_time).all()
    assert np.isnan(early.finish_time).any()  # it stopped before the stream drained
    np.testing.assert_array_equal(early.finish_time[5:12], full.finish_time[5:12])
    assert len(early.decision_s) > 0


@pytest.mark.slow
def test_short_gavel_stream_ratio_matches_the_doc(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "reproduction_gavel.md").read_text()
    assert " ".join(SHORT_ARGS) in doc and f"{SHORT_RATIO:.2f}" in doc
    GAVEL["main"]([*SHORT_ARGS, "--out", str(tmp_path)])
    import csv

    rows = {r["scheduler"]: r for r in csv.DictReader((tmp_path / "runs.csv").open())}
    assert rows["gavel"]["effects"] == rows["gavel_agnostic"]["effects"]
    assert int(rows["gavel"]["window_unfinished"]) == 0
    ratio = float(rows["gavel_agnostic"]["window_avg_jct_h"]) / float(
        rows["gavel"]["window_avg_jct_h"]
    )
    assert ratio == pytest.approx(SHORT_RATIO, abs=0.015)
