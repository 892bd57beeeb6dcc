// Package outcome holds what a run hands out: the Events it emits as it
// goes, which Observers receive (StepStats, ResourceSample, an elastic
// run's membership changes), and the Summary it returns (Result, Epoch,
// PeerStats, the gossip report). They are plain values, with JSON tags
// for the --summary file, so that the observers (mirrored/observe) and
// the report (mirrored/report) read them without importing the engine,
// and the engine names them through aliases (mirrored.Event …).
package outcome
