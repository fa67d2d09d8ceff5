import sys

from infra.cli import main

sys.exit(main())
