"""Tooling around the library, not part of a run's hot path: ahead-of-time compiles for TPU
slices and their reports (aot, aot_report, topologies), the step measurement that compares
configs (measure), and the compile cache the launchers use (the compile clock sits in
`metrics`: the engine reads it)."""
