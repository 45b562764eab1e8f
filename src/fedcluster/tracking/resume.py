"""What ``fedcluster resume RUN_DIR key=value ...`` may change, checked before anything is built.

A resumed run must continue the same experiment: keys that change the data, the model or the
training arithmetic (seed, data_seed, num_clients, dataset, scenario*, model*, algorithm*, lr, engine,
...) are refused. Only the length of the run and how it is observed or resourced may change.
``engine`` is refused too: the training paths agree to float tolerance, not bit for bit, so a resumed
run would no longer equal a straight one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedcluster.config.run_config import RunConfig, load_raw, resolve
from fedcluster.errors import ConfigError, UserError
from fedcluster.tracking.run_dir import RunDir

FINAL_FILES = ("clients.csv", "summary.json", "accuracy.png")  # written in this order when a run ends
MAY_CHANGE = ("rounds", "eval_every", "checkpoint_every", "progress", "threads", "workers", "tracking", "tracking_uri",
              "tracking_experiment", "tensorboard_dir", "ranks")


@dataclass
class ResumePlan:
    cfg: RunConfig
    typed: dict[str, Any]
    run_dir: RunDir  # locked for this process
    done: int | None  # rounds in the checkpoint (None: no checkpoint yet, the run starts over)

    @property
    def finished(self) -> bool:
        return self.done == self.cfg.rounds and all((self.run_dir.path / name).is_file() for name in FINAL_FILES)


def plan_resume(path: Path, overrides: list[str]) -> ResumePlan:
    """Lock ``path``, read its config and checkpoint, apply ``overrides`` and refuse forbidden changes."""
    if not (path / "config.yaml").is_file():
        raise UserError(f"{str(path)!r} has no checkpoint.pt and no config.yaml: it is not a fedcluster run "
                        "directory")
    raw_overrides = load_raw(None, overrides)
    if "out" in raw_overrides:
        raise ConfigError(f"resume continues in {path}; out= cannot change")
    run_dir = RunDir(path)
    run_dir.acquire(new=False)
    try:
        before, _ = resolve(load_raw(path / "config.yaml", []))
        raw = load_raw(path / "config.yaml", overrides)
        raw["out"] = str(path)
        cfg, typed = resolve(raw)
        state = run_dir.load_checkpoint() if run_dir.checkpoint.exists() or run_dir.checkpoint.is_symlink() else None
        reference = state.get("config", before.to_dict()) if state is not None else before.to_dict()
        changed = [k for k, v in cfg.to_dict().items() if k not in (*MAY_CHANGE, "out") and reference.get(k) != v]
        if changed:
            raise ConfigError(f"resume cannot change {', '.join(changed)} (the data, the model or the training "
                              f"would differ from the checkpoint); only {', '.join(MAY_CHANGE)} may change; "
                              "start a new run with another out= instead")
        done = None if state is None else int(state["round"])
        cfg.out = before.out  # config.yaml keeps the out= it was started with (Run is given run_dir)
        if done is not None and cfg.rounds < done:
            raise ConfigError(f"rounds={cfg.rounds} is fewer than the {done} rounds {path} has done; "
                              f"pass rounds={done} or more")
    except BaseException:
        run_dir.release()
        raise
    return ResumePlan(cfg, typed, run_dir, done)
