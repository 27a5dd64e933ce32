"""`python -m plasmafs.cli`: the `pfs` command."""

import sys

from plasmafs.cli.main import main

sys.exit(main())
