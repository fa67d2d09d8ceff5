"""The mlinfra CrossGuard policy pack: one rule per file in `policies.rules`, registered in `policies.pack`."""
