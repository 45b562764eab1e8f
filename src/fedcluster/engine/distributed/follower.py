"""The run directory as ranks other than 0 see it: every write is rank 0's."""

from __future__ import annotations

from typing import Any

from fedcluster.tracking.run_dir import RunDir


class FollowerRunDir(RunDir):
    """The run directory as ranks other than 0 see it: read-only (the checkpoint to resume from); every
    write is rank 0's."""

    def acquire(self, new: bool) -> bool:
        return False

    def check_writable(self) -> None:
        pass

    def check_space(self, checkpoint_bytes: int) -> None:
        pass

    def release(self) -> None:
        pass

    def abandon(self) -> None:
        pass

    def create(self, config_yaml: str) -> None:
        pass

    def write_config(self, config_yaml: str) -> None:
        pass

    def restart_at(self, completed: int) -> list[dict[str, float]]:
        return []

    def append_round(self, row: dict[str, Any]) -> None:
        pass

    def append_jsonl(self, name: str, record: dict[str, Any]) -> None:
        pass

    def write_clients(self, rows: list[dict[str, Any]]) -> None:
        pass

    def write_summary(self, summary: dict[str, Any]) -> None:
        pass

    def save_checkpoint(self, state: dict[str, Any]) -> None:
        pass
