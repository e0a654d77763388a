"""Process start-up tweaks, fenced in one place; each module says what it saves, measured.

Issue 29 measured every start-up tweak on user-visible commands and kept only those saving at least
5 % of a command's CPU time or instruction count: :mod:`.npthreads` (8-18 % of ``opdesign new``'s CPU
time). The pydantic plugin-scan shortcut (``pydplugins``) saved 3.5 % of ``new``, 4.4 % of ``validate``
and 0.9 % of a 23-design bulk ``validate`` (callgrind instructions) and was removed. The fast path of
plain command lines is :mod:`opdesign.cli.fast` (its docstring gives its figures).
"""
