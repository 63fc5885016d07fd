"""component-base logging flags kccm supports (``logs/api/v1``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kccm.app.config import (
    LoggingSettings,
    ManagerConfig,
)
from kccm.app.flags import FlagSet, go_quote
from kccm.app.options.checks import (
    IGNORED,
    not_negative,
)
from kccm.app.options.generic import GenericOptions

LOGGING_FORMATS = ("text", "json")


@dataclass
class LogsOptions:
    """Section "logs" (component-base logging flags kccm supports)."""

    generic: GenericOptions = field(default_factory=GenericOptions, compare=False)
    """The group holding --feature-gates (LoggingAlphaOptions unlocks the alpha flags)."""
    verbosity: int = LoggingSettings.verbosity
    logging_format: str = LoggingSettings.format
    log_flush_frequency: float = 5.0
    vmodule: str = ""
    text_split_stream: bool = False
    text_info_buffer_size: str = "0"
    json_split_stream: bool = False
    json_info_buffer_size: str = "0"

    def add_flags(self, fs: FlagSet) -> None:
        s = fs.section("logs")
        s.integer(self, "verbosity", "v", "number for the log level verbosity", type_name="Level")
        fs.set_shorthand("v", "v")
        s.string(
            self,
            "logging_format",
            "logging-format",
            'Sets the log format. Permitted formats: "json", "text".',
        )
        s.duration(
            self,
            "log_flush_frequency",
            "log-flush-frequency",
            f"Maximum number of seconds between log flushes. {IGNORED}",
        )
        s.string(
            self,
            "vmodule",
            "vmodule",
            "comma-separated list of pattern=N settings for file-filtered logging. A "
            "pattern matches a source file's name without its extension (glob syntax); "
            "kccm applies it to both log formats.",
        )
        s.boolean(
            self,
            "text_split_stream",
            "log-text-split-stream",
            "[Alpha] In text format, write error messages to stderr and info messages to "
            "stdout. The default is to write a single stream to stderr. Enable the "
            "LoggingAlphaOptions feature gate to use this.",
        )
        s.string(
            self,
            "text_info_buffer_size",
            "log-text-info-buffer-size",
            "[Alpha] In text format with split output streams, the info messages can be "
            "buffered for a while. Checked, then ignored: kccm's log handler does not buffer. "
            "Enable the LoggingAlphaOptions feature gate to use this.",
        )
        s.boolean(
            self,
            "json_split_stream",
            "log-json-split-stream",
            "[Alpha] In JSON format, write error messages to stderr and info messages to "
            "stdout. Enable the LoggingAlphaOptions feature gate to use this.",
        )
        s.string(
            self,
            "json_info_buffer_size",
            "log-json-info-buffer-size",
            "[Alpha] In JSON format with split output streams, the info messages can be "
            "buffered for a while. Checked, then ignored: kccm's log handler does not buffer. "
            "Enable the LoggingAlphaOptions feature gate to use this.",
        )

    def validate(self) -> list[str]:
        errors = not_negative("v", self.verbosity)
        if self.logging_format not in LOGGING_FORMATS:
            errors.append(
                f"--logging-format: format {go_quote(self.logging_format)} is not registered "
                f"(permitted: {', '.join(LOGGING_FORMATS)})"
            )
        try:
            parse_vmodule(self.vmodule)
        except ValueError as err:
            errors.append(f"--vmodule: {err}")
        gates = self.generic.feature_gates
        alpha = gates.get("LoggingAlphaOptions", gates.get("AllAlpha", False))
        for flag, value in (
            ("log-text-info-buffer-size", self.text_info_buffer_size),
            ("log-json-info-buffer-size", self.json_info_buffer_size),
        ):
            try:
                size = parse_quantity(value)
            except ValueError as err:
                errors.append(f"--{flag}: {err}")
                continue
            if size and not alpha:
                errors.append(f"--{flag}: Forbidden: Feature LoggingAlphaOptions is disabled")
        for flag, on in (
            ("log-text-split-stream", self.text_split_stream),
            ("log-json-split-stream", self.json_split_stream),
        ):
            if on and not alpha:
                errors.append(f"--{flag}: Forbidden: Feature LoggingAlphaOptions is disabled")
        return errors

    def apply_to(self, config: ManagerConfig) -> None:
        split = self.json_split_stream if self.logging_format == "json" else self.text_split_stream
        config.logging = LoggingSettings(
            verbosity=self.verbosity,
            format=self.logging_format,
            vmodule=parse_vmodule(self.vmodule),
            split_stream=split,
        )
        if self.log_flush_frequency != 5.0:
            config.warn("--log-flush-frequency is ignored: kccm's log handler does not buffer")
        if parse_quantity(self.text_info_buffer_size) or parse_quantity(self.json_info_buffer_size):
            config.warn("--log-*-info-buffer-size is ignored: kccm's log handler does not buffer")


_QUANTITY = re.compile(r"([0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|K|M|G|T|P|E)?")
_QUANTITY_SCALE = {
    None: 1,
    "k": 1000,
    "K": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
    "P": 1000**5,
    "E": 1000**6,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "Pi": 1024**5,
    "Ei": 1024**6,
}


def parse_quantity(text: str) -> int:
    """A byte count as component-base accepts it: ``512``, ``1K``, ``2Ki``, ``5Mi``..."""
    match = _QUANTITY.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{go_quote(text)} is not a quantity (e.g. 512, 1K, 2Ki, 5Mi)")
    return int(match.group(1)) * _QUANTITY_SCALE[match.group(2)]


def parse_vmodule(text: str) -> tuple[tuple[str, int], ...]:
    """klog ``--vmodule``: ``pattern=N,pattern2=M`` (N a non-negative integer)."""
    out: list[tuple[str, int]] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        pattern, sep, level = item.partition("=")
        if not sep or not pattern or not level.isdigit():
            raise ValueError(f"{go_quote(item)} is not of the form pattern=N")
        out.append((pattern, int(level)))
    return tuple(out)
