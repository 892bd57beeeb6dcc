package observe

// DefaultLogEvery is the steps between the per-step figures (TensorBoard's
// scalars, the plain progress lines, a Sampled hook's steps) when a
// constructor is given 0: about 19 points per epoch of LeNet on MNIST with
// 1 replica at batch 64, 9 with 2.
const DefaultLogEvery = 50

// logEvery is every, or DefaultLogEvery for 0 or less.
func logEvery(every int) int {
	if every > 0 {
		return every
	}
	return DefaultLogEvery
}
