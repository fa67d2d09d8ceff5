import gc
import sys

from infra.cli import main

# A verb imports a few thousand classes (the provider SDKs' types, pydantic models) and builds many short-lived
# objects; at the default first threshold (700) the cyclic collector walks the young objects some 500 times in
# one preview while almost nothing is garbage: a fifth of a cold preview's CPU (benchmarks/RESULTS.md). With a
# larger first threshold it runs about 20 times; cycles are still collected, the output is the same. The
# process is the CLI's own: `pulumi up` runs __main__.py in the language host, untouched by this.
GC_FIRST_THRESHOLD = 50_000
gc.set_threshold(GC_FIRST_THRESHOLD, *gc.get_threshold()[1:])

code = main()
# At exit the interpreter's last collections walk every object the verb left alive (the SDKs' classes, the
# preview), most of a second of a one-second verb while nothing is garbage (benchmarks/RESULTS.md). Frozen, those
# objects are left out of them; atexit handlers, thread joins and the modules' teardown run as before.
gc.freeze()
sys.exit(code)
