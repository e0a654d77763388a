"""The tuning loop's parts (issue 32): the self-check's shape rule (:mod:`.shrink`), the SIM result
cache (:mod:`.simcache`), SIM workers (:mod:`.workers`) and ``opdesign tune`` (:mod:`.tune`)."""
