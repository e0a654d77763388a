"""The cost model proper: ISA cycles, FAI stages, parameters, calibration."""
