// Package membership is the agreement of an elastic run on who trains:
// a deterministic state machine with no goroutines, locks, clocks or
// network, in the manner of mirrored/gossip's machine and of raft's core.
// Its driver (mirrored's elastic.go) owns the sockets, the timers, the
// wire's encoding and the training state; it feeds the machine inputs (a
// peer's message, the answer to a question or its failure, a timer's
// tick, a local event: the run starts, a generation ended or formed, a
// commit was reached) and carries out the Effects each returns: messages
// to send, a wait, a Decision.
//
// The protocol. A run goes through generations, each a fixed list of
// members (cluster indices, in rank order) that trains as one ring. When
// a generation ends (a peer lost, or a change at a commit), its lowest
// surviving member, the coordinator, asks everyone concerned for their
// status, decides the next members (Decide) and proposes them; a member
// promises at most one member list per generation, and once every member
// promised the coordinator tells them to go. A worker that restarted
// asks to join and is admitted at the next commit; one the schedule
// drops leaves there.
//
// Invariants:
//   - Majority: a side with fewer than half of the last generation's
//     members stops, a side with exactly half only goes on if it holds
//     that generation's lowest index, so a partition never goes on as two
//     runs; fewer than MinWorkers stop too (Decide).
//   - Agreement: every member of a generation forms it with the same
//     list, and a generation is only taken after its proposal was
//     promised (Receive's answers to propose and go).
//   - Replay: membership changes only at commits, and a run's record (a
//     list of Change, in Result.Membership) given back as Config.Schedule
//     makes the same changes at the same steps (AtCommit, Started), so a
//     replayed run ends with the recorded run's parameters, bit for bit.
//
// A change is told to people as one line (Line, line.go), with where the
// new generation starts and its global batch and learning rate (Shift,
// the learning-rate policy: LRScale, LRKeep); LossWords says in words why
// a generation lost a peer. Timers are the driver's clocks.
//
// The transcripts in testdata/ run the protocol's sequences (the chief
// lost, two losses, a loss during a change, partitions, a join, a
// replayed schedule, SIGTERM) through machines wired by hand, every
// message and decision written out (TestTranscripts, -rewrite).
package membership
