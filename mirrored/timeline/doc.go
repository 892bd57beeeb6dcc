// Package timeline records where each peer's time goes, span by span, and
// writes the peers' records as one trace in the Chrome Trace Event Format
// (chrome://tracing, Perfetto): one process per peer, one track (thread)
// per kind of work (input, compute, wait, combine, update, evaluation,
// checkpoint, gossip), all on rank 0's clock.
//
// A Recorder keeps the last Steps steps of one peer (a ring: older spans
// are dropped, so a long run's timeline stays bounded: about 100 bytes a
// span in memory, 6 spans a step); the training loops feed it the times
// they already take for their own accounting, so recording adds an append
// under a mutex per span. The collective reports each all-reduce's phases
// (collective.Options.Phases: Recorder.Phase), which the combine or
// gradient-bucket span containing them takes onto its track, nested. At the end every peer's spans are gathered on
// the chief, shifted by that peer's clock offset (MeasureOffset, taken at
// start-up: the median of several round trips to rank 0, NTP's estimate),
// and Write marks, at every synchronous combine, the rank that arrived
// last (the others' "wait" is time spent waiting for it).
package timeline
