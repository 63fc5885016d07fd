"""The chaos bench (issue 28): leader SIGKILLs and apiserver restarts under real daemons while
Services and Nodes change; see :mod:`kccm.testing.chaos.engine` and ``bench/chaos.py``."""

from kccm.testing.chaos.engine import ChaosSettings, run_chaos
from kccm.testing.chaos.local import LocalWorld
from kccm.testing.chaos.report import Ledger
from kccm.testing.chaos.world import ChaosWorld

__all__ = ["ChaosSettings", "ChaosWorld", "Ledger", "LocalWorld", "run_chaos"]
