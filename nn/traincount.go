package nn

// TrainCounter is a Model that counts, in ForwardBackward, the examples of
// its batch whose largest score is their label's: the training accuracy,
// from the scores the loss is computed from anyway (the gradient's
// arithmetic is unchanged). nn's models implement it; a Model written
// elsewhere may.
type TrainCounter interface {
	// TrainCorrect is the count of the last ForwardBackward's batch.
	TrainCorrect() int
}
