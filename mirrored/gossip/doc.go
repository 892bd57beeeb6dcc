// Package gossip is decentralised parameter averaging: each rank keeps
// its own parameter vector, runs local steps on it, and between steps
// averages it with one peer chosen by a Schedule, over point-to-point
// messages (collective.Comm's Send and Recv with Tag). It is what
// mirrored.Run trains with, under the gossip strategy (AD-PSGD,
// Lian et al., 2018): no barrier and no collective after start-up, so a
// slow or dead peer does not stop the others.
//
// The package is split the way etcd's raft is:
//
//   - schedule.go: Schedule.Peer, pure seeded functions of (seed, rank,
//     size, round) that say whom a rank averages with (random, rotating,
//     SGP's exponential graph).
//   - wire.go: the message codec. Decoding bounds every length by the
//     bytes present and the model's size before allocating.
//   - machine.go, serve.go: the averaging protocol as a state machine with
//     no goroutines, locks, network or clock. It takes inputs (a local step
//     begins or ends, an exchange begins, a message arrives, a peer fails,
//     finish) and returns effects (messages for whom, peers that left, the
//     pending exchange's outcome); its tests wire machines by hand.
//   - node.go, exchange.go: Node drives one machine over a Comm: a receiver
//     and a writer goroutine per peer, the timeouts, the mutex around the
//     machine.
//   - options.go: Options and DefaultOptions, every knob with its default.
//
// The protocol. The pairwise exchange is atomic and cannot deadlock:
//
//   - The initiator marks itself busy with peer p, sends REQUEST(x_i) and
//     waits for the answer (Exchange), or goes on with local steps while
//     it travels (Begin ... Wait), without holding any lock.
//   - The responder's receiver (one per peer, always reading) answers at
//     once, under the parameter lock: it sets x_j ← (x_j+x_i)/2 and sends
//     REPLY((x_j+x_i)/2); the initiator's receiver applies it on arrival,
//     in order with that peer's other messages. If the initiator's vector
//     did not change meanwhile it copies the average, and both end with
//     the same bits (float addition is commutative); otherwise it adds the
//     change avg−x_sent.
//   - Nobody waits while holding the lock, and receivers never wait for
//     their own rank's exchanges, so no cycle of waits can form. A rank
//     waiting on its own exchange still serves other peers (dense mode);
//     when two ranks pick each other, the lower rank's request is served
//     and the higher rank's answered BUSY, so exactly one average happens.
//     In sparse mode a waiting rank answers BUSY to everyone else.
//   - While a rank is inside a local step (between Read and Apply), merges
//     make its gradient stale; a responder whose step already absorbed
//     Options.MaxStaleness merges (counting the answer to its own exchange
//     in flight) answers BUSY. The initiator never waits for a peer's
//     computation, only for its receiver, so a slow peer does not slow the
//     others.
//   - In sparse mode a rank sends only the coordinates it changed since
//     its last exchange with that peer (local updates and merges with
//     others). Every other coordinate is equal on both sides, so averaging
//     those alone is exact. Each rank records, per peer, the value a
//     coordinate had before its first change since their last exchange:
//     that is the peer's current value of it, which the responder needs
//     for the coordinates only it changed.
//   - Every message carries the sender's step count of every rank (as last
//     heard; each rank keeps the maximum) and the stop flag, so progress
//     and a stop request spread with the averages.
//   - A peer whose link fails, whose message is unreadable, or that does
//     not answer within Options.Timeout is dropped from the peer set for
//     good; the others carry on. Finish swaps the final parameters.
//
// Invariants the machine keeps, which its tests check step by step:
//
//   - Conservation: each exchange leaves the sum of the replicas' vectors
//     unchanged (up to float rounding of the added change), whatever the
//     interleaving of steps, requests and answers.
//   - At most one exchange per rank is pending, and an exchange ends in
//     exactly one outcome (Averaged, Declined or Lost).
//   - A local step absorbs at most MaxStaleness merges.
//   - Sparse mode computes bit for bit what dense mode computes (with
//     SparseTolerance 0).
//   - A dead peer is never picked again, gets no message, and its late
//     requests and answers change no parameter.
package gossip
