"""scripts/clone_fidelity.py: how the network's granted claims are compared with its teacher's."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import script_module

from hetsched.envs.spaces import ActionCodec, LevelSets

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "clone_fidelity.py"


def _module() -> Any:
    return script_module("clone_fidelity.py")


def _core() -> SimpleNamespace:
    """Four nodes (types 0, 0, 1, 1), a window of 3 jobs; job j runs at (j + 1) x type speed."""
    levels = LevelSets(gpu=(1.0, 2.0), cpu=(1.0,), mem=(1.0,))
    codec = ActionCodec(3, levels)
    speed = np.array([1.0, 3.0])

    def isolated(model: Any, gpu_type: Any, count: Any, packed: bool) -> Any:
        return (np.asarray(model) + 1.0) * speed[np.asarray(gpu_type)] * np.asarray(count)

    return SimpleNamespace(
        codec=codec,
        n_place=codec.n,
        cluster=SimpleNamespace(node_type=np.array([0, 0, 1, 1])),
        jt=SimpleNamespace(gpu_count=np.array([[1, 2]] * 3)),
        wl=SimpleNamespace(model=np.array([0, 1, 2])),
        tm=SimpleNamespace(isolated=isolated),
    )


def test_claims_compare_jobs_by_gpu_type_and_level_not_by_node() -> None:
    mod = _module()
    core = _core()
    enc = core.codec.encode
    window = np.array([0, 1, 2])
    # Teacher: job 0 on node 0 (type 0), job 1 on node 2 (type 1), job 2 on node 3 at 2 GPUs.
    label = np.array([enc(0, 0, 0, 0), 0, enc(1, 0, 0, 0), enc(2, 1, 0, 0)], dtype=np.int64)
    # Network: job 0 on node 1 (same type: agrees), job 1 on node 0 (type 0: other type, 1/3
    # the rate), job 2 on node 3 at 1 GPU (other level), and evicts on node 2.
    evict = core.n_place  # the first eviction action
    net = np.array([enc(1, 0, 0, 0), enc(0, 0, 0, 0), evict, enc(2, 0, 0, 0)], dtype=np.int64)
    forced = np.array([False, True, True, False])
    legal = np.array([True, False, True, True])
    t = mod.Tally()
    t.add(core, window, net, label, forced, legal)
    c = t.counts
    assert (c["agree"], c["other_type"], c["other_level"]) == (1, 1, 1)
    assert (c["net_missed"], c["net_extra"]) == (0, 0)
    assert (c["net_evict"], c["net_evict_forced"], c["teacher_evict"]) == (1, 1, 0)
    assert c["illegal_labels"] == 1
    assert sorted(np.exp(t.log_ratio)) == pytest.approx([1 / 3, 1 / 2])
    # A job only one side claims counts as missed or extra.
    t2 = mod.Tally()
    t2.add(core, window, np.zeros(4, dtype=np.int64), label, forced, legal)
    t2.add(core, window, label, np.zeros(4, dtype=np.int64), forced, legal)
    assert (t2.counts["net_missed"], t2.counts["net_extra"]) == (3, 3)
    t.merge(t2)
    assert t.counts["net_missed"] == 3 and len(t.log_ratio) == 2
    assert t.line().startswith("9 claimed jobs: agree 0.111")


@pytest.mark.parametrize(
    ("args", "match"),
    [(["--split", "nope"], "unknown split 'nope'"), (["--scenario", "nope"], "unknown scenario")],
)
def test_script_names_a_bad_split_or_scenario(args: list[str], match: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and match in lines[0], proc.stderr
