"""The line that ends the kernel proper in a generated ``<op>_kernel.py``: what follows it is the host-side
self-check (:mod:`opdesign.pypto_run.selfcheck`). Its own module so that rendering a kernel
(:mod:`opdesign.render.design`) does not load the self-check runner (argparse, subprocess)."""

HARNESS_MARKER = "# --- self-check (host side, not part of the design)"
