"""Every integration example runs (reduced setting) and does what docs/integrations.md says."""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import numpy as np
import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples" / "integrations"


def run_example(name: str, monkeypatch: pytest.MonkeyPatch, fast: bool = True) -> Any:
    """Load ``docs/examples/integrations/<name>.py`` (fast mode) and call its ``main()``."""
    monkeypatch.setenv("HETSCHED_EXAMPLE_FAST", "1" if fast else "0")
    mod = runpy.run_path(str(EXAMPLES / f"{name}.py"), run_name="example")
    return mod["main"]()


@pytest.fixture(autouse=True)
def _one_torch_thread() -> None:
    torch = pytest.importorskip("torch")
    torch.set_num_threads(1)


def test_every_example_is_documented_and_tested() -> None:
    doc = (EXAMPLES.parents[1] / "integrations.md").read_text()
    tested = set(Path(__file__).read_text().split('run_example("')[1:])
    names = {t.split('"')[0] for t in tested}
    for f in EXAMPLES.glob("*.py"):
        assert f"examples/integrations/{f.name}" in doc, f"{f.name} is not in integrations.md"
        assert f.stem in names, f"{f.name} has no test"


def test_pettingzoo_basics(monkeypatch: pytest.MonkeyPatch) -> None:
    out = run_example("pettingzoo_basics", monkeypatch)
    assert out["steps"] >= 2 and out["avg_jct_h"] > 0


def test_baselines_in_env(monkeypatch: pytest.MonkeyPatch) -> None:
    out = run_example("baselines_in_env", monkeypatch)
    for env_jct, sim_jct in out.values():
        assert env_jct == pytest.approx(sim_jct, rel=1e-9)


def test_sb3_ppo_and_maskable_ppo_train_on_central_env(monkeypatch: pytest.MonkeyPatch) -> None:
    out = run_example("sb3_central", monkeypatch)
    assert set(out) == {"PPO", "MaskablePPO"}
    assert all(np.isfinite(v) and v <= 0 for v in out.values())  # team rewards are penalties


def test_shared_ppo_through_vector_adapter(monkeypatch: pytest.MonkeyPatch) -> None:
    out = run_example("sb3_shared_vector", monkeypatch)
    assert out["timesteps"] >= 1000
    assert out["invalid"] == 0  # the masked policy never picks an illegal action


@pytest.mark.slow
def test_sb3_central_full_few_thousand_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    out = run_example("sb3_central", monkeypatch, fast=False)  # 4096 steps per algorithm
    assert all(np.isfinite(v) for v in out.values())


@pytest.mark.torchrl
def test_torchrl_rollout(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torchrl")
    td = run_example("torchrl_rollout", monkeypatch)
    assert td["node", "action_mask"].shape[-1] == 289
    assert float(td["next", "node", "info", "invalid_action"].sum()) == 0.0  # masked sampling
    assert td["state"].shape[-1] > 0


@pytest.mark.rllib
@pytest.mark.slow
def test_rllib_ppo_trains(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("ray.rllib")
    result = run_example("rllib_ppo", monkeypatch)
    assert result["env_runners"]["num_env_steps_sampled_lifetime"] >= 256
