package data

// ShardSize returns the number of examples rank holds when n examples are
// split over world ranks by DATA sharding (example i goes to rank i%world):
// ceil(n/world) for the first n%world ranks, floor(n/world) for the rest.
func ShardSize(n, world, rank int) int {
	s := n / world
	if rank < n%world {
		s++
	}
	return s
}

// AgreedSteps returns the number of steps per epoch every rank runs when
// the smallest shard holds minShard examples and the largest maxShard.
// Ranks that know only their own shard size (ShardCount) can obtain both
// with one Min and one Max all-reduce.
//
// Uneven shards. In synchronous training every rank must run the same
// number of steps per epoch, or a collective waits forever for a rank that
// stopped early. The policy, which every rank computes from numbers they
// all know:
//
//   - Drop remainder (the default for training, as with
//     MultiWorkerMirroredStrategy): every rank runs floor(minShard/batch)
//     steps of full batches. A rank's examples beyond steps*batch are left
//     out of this epoch (under DATA sharding: fewer than a batch, plus one
//     on the larger shards); when shuffling, each shard is reshuffled every
//     epoch, so different examples are left out each time and none is
//     skipped for good.
//   - Keep remainder (evaluation, or trainers that weight by batch size):
//     every rank runs ceil(maxShard/batch) steps. The last batch may be
//     partial, and on a rank whose shard is one smaller it may be empty
//     (Size 0): such a rank still joins the last step's collective, with no
//     examples. Every example is then used exactly once per epoch.
//
// Pipelines apply this: they emit exactly the agreed number of batches per
// epoch, cutting extra batches and padding with empty ones.
func AgreedSteps(minShard, maxShard, batch int, dropRemainder bool) int {
	if batch <= 0 || maxShard <= 0 {
		return 0
	}
	if dropRemainder {
		return minShard / batch
	}
	return (maxShard + batch - 1) / batch
}

// Steps returns the number of steps per epoch all world ranks agree on for
// n examples under DATA sharding (use world = 1 for shard policy OFF, where
// every rank reads all n).
func Steps(n, world, batch int, dropRemainder bool) int {
	if world <= 0 {
		return 0
	}
	return AgreedSteps(n/world, (n+world-1)/world, batch, dropRemainder)
}
