"""The mlinfra Pulumi program: reads `mlinfra:kind` and builds that stack kind."""

import stacks

stacks.build()
