"""One package per skeleton (``sk01``, ``sk02``, ``sk16``): applicability, planning, budgets, variants and
validator rules of that skeleton; its templates live in ``templates/<id>/``.

:mod:`~opdesign.skeletons.base` defines what a skeleton provides, :mod:`~opdesign.skeletons.registry`
lists them and picks one for a SPEC. Adding a skeleton means adding one package here, its template
folder and one line in the registry.
"""
