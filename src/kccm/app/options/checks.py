"""Checks every flag group shares; each message names its flag."""

from __future__ import annotations

import ipaddress

from kccm.app.flags import go_quote
from kccm.runtime.tls import NamedCertKey, load_certificates

IGNORED = "Accepted for compatibility; kccm ignores it."


def positive(flag: str, value: float) -> list[str]:
    return [] if value > 0 else [f"--{flag}: must be greater than zero, got {value:g}"]


def not_negative(flag: str, value: float) -> list[str]:
    return [] if value >= 0 else [f"--{flag}: must not be negative, got {value:g}"]


def port(flag: str, value: int) -> list[str]:
    if 0 <= value <= 65535:
        return []
    return [f"--{flag}: {value} must be between 0 and 65535, inclusive (0 disables)"]


def ip(flag: str, value: str) -> list[str]:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return [f"--{flag}: {go_quote(value)} is not a valid IP address"]
    return []


def ca_bundle(flag: str, path: str) -> list[str]:
    """A readable PEM file holding at least one certificate."""
    if not path:
        return []
    errors = readable(flag, path)
    if errors:
        return errors
    try:
        with open(path, "rb") as stream:
            load_certificates(stream.read())
    except ValueError as err:
        return [f"--{flag}: {path} is not a PEM certificate bundle ({err})"]
    return []


def no_blanks(flag: str, values: list[str]) -> list[str]:
    if any(not value.strip() for value in values):
        return [f"--{flag}: empty value in {show(values)}"]
    return []


def show(values: list[str]) -> str:
    return "[" + ",".join(values) + "]"


def readable(flag: str, path: str) -> list[str]:
    if not path:
        return []
    try:
        with open(path, "rb") as stream:
            stream.read(1)
    except OSError as err:
        return [f"--{flag}: cannot read {path}: {err.strerror or err}"]
    return []


def sni_errors(flag: str, entries: list[str]) -> list[str]:
    """``cert,key[:name,...]`` entries with readable files (cliflag NamedCertKey syntax)."""
    errors: list[str] = []
    for entry in entries:
        try:
            pair = NamedCertKey.parse(entry)
        except ValueError as err:
            errors.append(f"--{flag}: {err}")
            continue
        errors += readable(flag, pair.cert_file) + readable(flag, pair.key_file)
    return errors
