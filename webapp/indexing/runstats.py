"""The scan vocabulary: states of a source and of a run, a file's status, and a run's statistics.

The enums are StrEnums, so JSON, the database and the templates keep the same plain strings.
`RunStats.to_dict()` is the API's stats object (docs/api.md, "Reindex and stats") and `Source.last_run`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

MAX_ERRORS = 100  # errors kept in a run's stats; error_count counts them all


class SourceState(StrEnum):
    """Whether a source's scan slot is taken (the `state` of a source)."""

    IDLE = "idle"
    QUEUED = "queued"
    INDEXING = "indexing"


class RunState(StrEnum):
    """Where one run is (the `state` of a run's stats)."""

    QUEUED = "queued"
    INDEXING = "indexing"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"  # its worker died (killed, host down) before it could finish


FINAL_STATES = frozenset({RunState.FINISHED, RunState.FAILED, RunState.CANCELLED, RunState.INTERRUPTED})


class FileStatus(StrEnum):
    """What the latest scan recorded for a file."""

    SUCCESS = "success"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass
class Progress:
    """Files extracted so far out of the files to extract."""

    done: int = 0
    total: int = 0


@dataclass
class RunStats:
    """The statistics of one run, live in Redis while it runs and kept on the source after."""

    state: RunState = RunState.QUEUED
    started_at: str | None = None
    finished_at: str | None = None
    total_scanned: int = 0
    new_files: int = 0
    modified_files: int = 0
    unchanged_files: int = 0
    deleted_files: int = 0
    successful: int = 0
    failed: int = 0
    skipped: int = 0
    error_count: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    progress: Progress = field(default_factory=Progress)
    current_file: str | None = None
    message: str | None = None

    def add_error(self, path: str, message: str) -> None:
        """Count an error, keeping the first MAX_ERRORS of them."""
        self.error_count += 1
        if len(self.errors) < MAX_ERRORS:
            self.errors.append({"path": path, "error": message})

    def count_file(self, status: FileStatus) -> None:
        """Count one extracted file under its status."""
        if status == FileStatus.SUCCESS:
            self.successful += 1
        elif status == FileStatus.FAILED:
            self.failed += 1
        else:
            self.skipped += 1

    @property
    def final(self) -> bool:
        """Whether the run has ended (in any way)."""
        return self.state in FINAL_STATES

    def to_dict(self) -> dict[str, Any]:
        """The stats object as JSON stores it (plain strings and numbers)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunStats:
        """Stats read back from JSON; keys it does not know are ignored, missing ones default."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        if "state" in values:
            values["state"] = RunState(values["state"])
        progress = values.get("progress") or {}
        values["progress"] = Progress(progress.get("done", 0), progress.get("total", 0))
        return cls(**values)
