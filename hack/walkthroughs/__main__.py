"""Follow DEVELOPMENT.md's three walk-throughs literally, in a scratch copy of the checkout.

    .venv/bin/python hack/walkthroughs [--only controller,setting,provider]   (make walkthroughs)

For each walk-through (add a controller, add a setting, add a provider method) it makes the
example's edits step by step and requires every check the text names to pass; then, for each
step (or part of a step) left out, and for the other half-done versions the text warns about,
it requires the check the text names for it to fail, and prints what it said. The scratch copy
(tracked and untracked files of the checkout, in a temporary directory, a git repository of its
own) is removed at the end; the checkout is never written. Slow (mypy and targeted pytest runs,
several times each): not part of ``make test``. Exit status 1 when any version is not as
expected, or when a walk-through no longer fits the code (an edit's anchor is gone).
"""

from __future__ import annotations

import argparse
import sys

import controller
import engine
import provider
import setting

WALKTHROUGHS = {
    "controller": controller.WALKTHROUGH,
    "setting": setting.WALKTHROUGH,
    "provider": provider.WALKTHROUGH,
}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="hack/walkthroughs", description=__doc__.split("\n")[0])
    parser.add_argument("--only", help="comma-separated: " + ",".join(WALKTHROUGHS))
    args = parser.parse_args(argv)
    only = None
    if args.only:
        only = {name.strip() for name in args.only.split(",")}
        unknown = only - set(WALKTHROUGHS)
        if unknown:
            parser.error(f"unknown walk-through(s): {', '.join(sorted(unknown))}")
    chosen = [w for key, w in WALKTHROUGHS.items() if only is None or key in only]
    return engine.main(chosen, None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
