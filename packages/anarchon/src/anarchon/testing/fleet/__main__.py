"""``python -m anarchon.testing.fleet worker ...``: one process of a fleet."""

import sys

from anarchon.testing.fleet._worker import main

sys.exit(main())
