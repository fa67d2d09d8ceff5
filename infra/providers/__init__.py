"""What the provider SDKs define, in one place: the resource and function type tokens mlinfra names, and the
resources' input schemas (read from the installed SDKs, so a wrong key or token fails at once)."""
