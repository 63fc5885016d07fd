"""``python -m kccm``."""

from kccm.app.cli import main

raise SystemExit(main())
