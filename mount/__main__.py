"""`python -m plasmafs.mount`: run one mount in this process (see `daemon`)."""

import sys

from plasmafs.mount.process import main

sys.exit(main())
