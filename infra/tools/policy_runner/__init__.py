"""The offline policy check: a preview's resources through the CrossGuard pack in policies/, over the
analyzer protocol, as `pulumi preview --policy-pack policies` runs it."""
