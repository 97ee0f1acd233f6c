"""What one harness run is asked to do: the model, the problems, the modes and the settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench.humaneval.modes import MODES, RESAMPLE_TEMPERATURE, Mode
from bench.humaneval.problems import Problem


@dataclass
class RunOptions:
    model: str
    work: Path
    problems: list[Problem]
    modes: list[Mode] = field(default_factory=lambda: list(MODES.values()))
    parallel: int = 1
    out: Path | None = None  # None: <work>/results.json
    verify_timeout_s: float = 60.0
    model_timeout_s: float = 120.0
    reflection_timeout_s: float | None = None  # None: model_timeout_s
    edit_format: str = "auto"
    temperature: float | None = None  # every mode but resample; None: the provider's default
    resample_temperature: float = RESAMPLE_TEMPERATURE
    max_output_tokens: int | None = None  # maxOutputTokens of every call; None: the model's own limit

    @property
    def reflection_seconds(self) -> float:
        return self.reflection_timeout_s or self.model_timeout_s

    @property
    def results_path(self) -> Path:
        return self.out or self.work / "results.json"

    @property
    def markdown_path(self) -> Path:
        return self.results_path.with_suffix(".md")
