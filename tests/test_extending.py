"""The examples of docs/extending.md run: a scheduler, a trace format and a reward term, each
added in one or two files without touching anything else (docs/examples/extending/)."""

from __future__ import annotations

import csv
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hetsched.cli import EXIT_BAD_INPUT
from hetsched.cli import evaluate as evaluate_cli
from hetsched.resources import PACKAGE_DIR

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "docs" / "examples" / "extending"
SEARCH = f"hydra.searchpath=[file://{EXAMPLES / 'conf'}]"
QUIET = ["seed=0", "output.plots=false", "output.tensorboard=false"]


@pytest.fixture
def examples_importable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.delenv("HYDRA_FULL_ERROR", raising=False)


def _results(run: Path) -> list[dict[str, str]]:
    with open(run / "results.csv", newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.usefixtures("examples_importable")
def test_scheduler_example_runs_beside_the_baselines(tmp_path: Path) -> None:
    run = tmp_path / "run"
    code = evaluate_cli.main(
        [SEARCH, "scheduler=[shortest_first,fifo]", "workload.num_jobs=30", *QUIET]
        + [f"hydra.run.dir={run}"]
    )
    assert code == 0
    rows = {r["scheduler"]: r for r in _results(run)}
    assert set(rows) == {"shortest_first", "fifo"}
    assert rows["shortest_first"]["num_jobs"] == "30"
    assert float(rows["shortest_first"]["avg_jct_h"]) > 0


@pytest.mark.usefixtures("examples_importable")
def test_trace_format_example_reads_its_file(tmp_path: Path) -> None:
    run = tmp_path / "run"
    trace = EXAMPLES / "jobs.jsonl"
    n_jobs = sum(1 for line in trace.read_text().splitlines() if line.strip())
    code = evaluate_cli.main(
        [SEARCH, "workload=jsonl", f"workload.path={trace}", "scheduler=[fifo,las]", *QUIET]
        + [f"hydra.run.dir={run}"]
    )
    assert code == 0
    rows = _results(run)
    assert {r["workload"] for r in rows} == {"jsonl"}
    assert {r["num_jobs"] for r in rows} == {str(n_jobs)}


@pytest.mark.usefixtures("examples_importable")
def test_trace_format_example_reports_a_bad_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "submit_s": 0, "duration_s": 60, "gpus": 1}\n{"id": "b"}\n')
    code = evaluate_cli.main(
        [SEARCH, "workload=jsonl", f"workload.path={bad}", "scheduler=fifo", *QUIET]
        + [f"hydra.run.dir={tmp_path / 'run'}"]
    )
    assert code == EXIT_BAD_INPUT
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and "bad.jsonl, line 2" in err[0]


#: Run with the patched package: the new term is a weight, an info key and part of the reward.
_REWARD_CHECK = """
import numpy as np
from hetsched.envs import INFO_KEYS, REWARD_KEYS, preempt_parallel_env
from hetsched.envs.rewards import RewardWeights
assert REWARD_KEYS[-1] == "reward_evict" and INFO_KEYS[: len(REWARD_KEYS)] == REWARD_KEYS
assert RewardWeights(evict=2.0).evict == 2.0
env = preempt_parallel_env(workload_kwargs={"num_jobs": 24}, reward_weights={"evict": 1.0})
obs, infos = env.reset(seed=0)
rng = np.random.default_rng(0)
evicted = 0.0
for _ in range(60):
    acts = {}
    for a in env.agents:
        legal = np.flatnonzero(obs[a]["action_mask"])
        acts[a] = int(rng.choice(legal))
    obs, rew, term, trunc, infos = env.step(acts)
    a0 = env.possible_agents[0]
    i0 = infos[a0]
    assert abs(rew[a0] - sum(i0[k] for k in REWARD_KEYS)) < 1e-9
    assert i0["reward_evict"] == -i0["evicted_jobs"]
    evicted += i0["evicted_jobs"]
    if all(term.values()) or all(trunc.values()):
        break
print("evictions", evicted)
"""


def test_reward_term_example_is_one_table_entry(tmp_path: Path) -> None:
    pytest.importorskip("pettingzoo")
    spec = importlib.util.spec_from_file_location("reward_term", EXAMPLES / "reward_term.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    pkg = tmp_path / "hetsched"
    shutil.copytree(
        PACKAGE_DIR, pkg, ignore=shutil.ignore_patterns("checkpoints", "__pycache__", "*.pyc")
    )
    rewards = pkg / "envs" / "rewards.py"
    text = rewards.read_text()
    marker = "    # a new term: one more entry here"
    assert text.count(marker) == 1
    rewards.write_text(text.replace(marker, example.TABLE_LINE + "\n" + marker))
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", _REWARD_CHECK],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert float(out.stdout.split()[-1]) > 0, "the random policy evicted nobody: nothing checked"
