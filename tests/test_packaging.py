"""The package installs and runs anywhere: resources inside it, env ids registered on import.

The slow test builds the wheel from a copy of the checkout, installs it into a fresh virtual
environment in a temporary directory (the checkout is not importable there), makes every
registered env and runs one tiny evaluation through the console entry point.
"""

from __future__ import annotations

import ast
import fnmatch
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

import hetsched
from hetsched.resources import CHECKPOINT_DIR, CONF_DIR, PACKAGE_DIR

ROOT = Path(__file__).resolve().parents[1]
#: Libraries the simulator must never import.
RL_LIBS = {"gymnasium", "pettingzoo", "torch", "ray", "stable_baselines3", "torchrl", "tensordict"}


def _clean_env() -> dict[str, str]:
    """This process's environment without PYTHONPATH (so only installed code is importable)."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("HYDRA_FULL_ERROR", None)
    return env


def test_resources_live_in_the_package() -> None:
    from hetsched.agents.policy import DEFAULT_CHECKPOINT

    assert CONF_DIR.parent == PACKAGE_DIR == Path(hetsched.__file__).parent
    assert (CONF_DIR / "evaluate.yaml").is_file() and (CONF_DIR / "train.yaml").is_file()
    assert DEFAULT_CHECKPOINT.parent == CHECKPOINT_DIR and DEFAULT_CHECKPOINT.is_file()


def test_package_data_covers_presets_and_checkpoints() -> None:
    """Every preset and shipped checkpoint matches a package-data pattern of pyproject.toml."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = meta["tool"]["setuptools"]["package-data"]["hetsched"]
    files = [*CONF_DIR.rglob("*.yaml"), *CHECKPOINT_DIR.glob("*.pt")]
    assert len(files) > 10
    for f in files:
        rel = f.relative_to(PACKAGE_DIR).as_posix()
        pats = [p.replace("**/", "*") for p in patterns]
        assert any(fnmatch.fnmatch(rel, p) for p in pats), f"{rel} is not in package-data"
    scripts = meta["project"]["scripts"]
    assert {"hetsched-evaluate", "hetsched-train", "hetsched-benchmark"} <= set(scripts)


def test_simulator_imports_no_rl_library() -> None:
    for path in sorted((PACKAGE_DIR / "sim").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                assert top not in RL_LIBS, f"{path.name} imports {name}"
                assert not name.startswith("hetsched.") or name.startswith("hetsched.sim"), (
                    f"{path.name} imports {name} (the simulator uses nothing else of ours)"
                )


def test_import_registers_the_ids_without_torch() -> None:
    code = (
        "import sys, hetsched, gymnasium, pettingzoo\n"
        "assert 'torch' not in sys.modules, 'import hetsched imported torch'\n"
        "assert 'hetsched.envs' not in sys.modules\n"
        "ids = set(gymnasium.registry) | set(pettingzoo.parallel_registry)\n"
        "want = set(hetsched.GYM_ENTRY_POINTS) | set(hetsched.PARALLEL_ENTRY_POINTS)\n"
        "assert want <= ids, want - ids\n"
        "print('ok')\n"
    )
    pytest.importorskip("pettingzoo")
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


#: Run inside the fresh venv: the installed copy is the one imported; every env makes and steps.
_CHECK = """
import sys
from pathlib import Path
import hetsched
venv = Path(sys.argv[1]).resolve()
assert Path(hetsched.__file__).resolve().is_relative_to(venv), hetsched.__file__
import gymnasium, pettingzoo
for env_id in hetsched.GYM_ENTRY_POINTS:
    env = gymnasium.make(env_id, workload_kwargs={"num_jobs": 12})
    obs, info = env.reset(seed=0)
    env.step(env.action_space.sample())
    env.close()
for env_id in hetsched.PARALLEL_ENTRY_POINTS:
    env = pettingzoo.make("parallel", env_id, workload_kwargs={"num_jobs": 12})
    obs, info = env.reset(seed=0)
    env.step({a: env.action_space(a).sample() for a in env.agents})
print("envs ok", len(hetsched.GYM_ENTRY_POINTS) + len(hetsched.PARALLEL_ENTRY_POINTS))
"""


@pytest.mark.slow
def test_wheel_installs_and_runs_outside_the_checkout(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(
        ROOT,
        src,
        ignore=shutil.ignore_patterns(
            ".git", "outputs", "multirun", "build", "dist", "*.egg-info", "__pycache__", ".*cache"
        ),
    )
    wheels = tmp_path / "wheels"
    env = _clean_env()
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q"]
        + ["-w", str(wheels), str(src)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("hetsched-*.whl")
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, env=env
    )
    py = venv / "bin" / "python"
    inst = subprocess.run(
        [str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--force-reinstall"]
        + [str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert inst.returncode == 0, inst.stderr[-3000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    pytest.importorskip("pettingzoo")
    made = subprocess.run(
        [str(py), "-c", _CHECK, str(venv)],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert made.returncode == 0, made.stderr[-3000:]
    assert made.stdout.strip() == "envs ok 3"
    run_dir = work / "run"
    ev = subprocess.run(
        [str(venv / "bin" / "hetsched-evaluate"), "scheduler=[maifs,fifo]", "seed=0"]
        + ["workload.num_jobs=12", f"hydra.run.dir={run_dir}", "output.tensorboard=false"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert ev.returncode == 0, ev.stderr[-3000:]
    rows = (run_dir / "results.csv").read_text().splitlines()
    assert len(rows) == 3 and {r.split(",")[0] for r in rows[1:]} == {"maifs", "fifo"}
    assert "outputs in" in ev.stdout and "plots/" in ev.stdout


def test_console_is_quiet_and_the_last_line_lists_every_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("matplotlib")
    from hetsched.cli import evaluate as evaluate_cli

    run = tmp_path / "run"
    code = evaluate_cli.main(
        ["scheduler=fifo", "seed=[0,1]", "workload.num_jobs=15", "output.tensorboard=false"]
        + ["progress=false", f"hydra.run.dir={run}"]
    )
    out = capsys.readouterr()
    assert code == 0
    assert "INFO" not in out.out + out.err  # INFO goes to the run's log file only
    assert (run / "evaluate.log").is_file()
    last = out.out.strip().splitlines()[-1]
    assert last.startswith(f"outputs in {run}: ")
    for name in ("results.csv", "results.md", "jobs.csv", "timeline.csv", "evaluate.log", "plots/"):
        assert name in last
