// Package nn holds the two models meshtrain trains on MNIST — LeNet-5
// (61,706 parameters) and softmax regression (7,850) — with their layers,
// losses, optimizers and learning-rate schedules, written for speed on one
// or two CPU cores. NewModelFor builds them for other image sets: any
// number of classes, and for softmax regression any image size.
//
// Invariants:
//
//   - A Model's parameters all live in one flat []float32 and its
//     gradients in another with the same layout (layer by layer, weights
//     then biases, PyTorch's weight layouts). Layers hold views into them,
//     so an optimizer updates the model with one call over the vector and
//     a collective all-reduces the gradient in one message. Model.Tensors
//     names its pieces as PyTorch's state_dict does (conv1.weight …), and
//     Optimizer.StateParts the optimizer's state (momentum_buffer …).
//   - Layers own no activations: Forward and Backward write into buffers
//     the caller gives them, and Backward adds parameter gradients into the
//     bound gradient buffer (the model zeroes it once per step).
//   - After the first step sized the buffers, a training step allocates
//     nothing (tested with testing.AllocsPerRun).
//   - The same seed gives bitwise-identical parameters and training. A
//     model splits each batch into DefaultShards parts, each with its own
//     layers, scratch and gradient buffer; the parts run on their own
//     goroutines when GOMAXPROCS > 1 and in turn otherwise, and the partial
//     gradients are summed in part order, so GOMAXPROCS does not change a
//     bit of the result.
//
// Compute: the matrix products are this package's own AVX2+FMA assembly
// kernels (gemm_amd64.s: a 4×16 register-tiled A·B and a 3×4 tile of dot
// products for A·Bᵀ), with portable Go loops on other CPUs (build tag
// purego forces them). gonum's blas32 was the first candidate; its
// float32 kernels are 4-wide SSE axpy and dot loops without FMA or
// register tiling, and on LeNet's shapes BenchmarkGemm measured it several
// times slower than these kernels (figures in BENCHMARKS.md).
// Convolutions need no im2col matrix: each example's input is laid out on
// a padded grid and the kernels read its shifted windows through a table
// of offsets (see Conv2D), for the output, the weight gradient and the
// input gradient alike; the im2col copies had cost more than the GEMMs'
// wasted junk columns. LeNet's conv → ReLU → 2×2 max-pool stages are one
// layer each (convPoolReLU; ReLU and max-pooling commute): the pooling,
// bias and ReLU run in one AVX2 pass over the convolution's grid and keep
// only a one-hot code per window, whose gradient pass writes straight
// onto the grid. Max-pooling leaves at most one gradient per window, so
// conv2's weight gradient is computed from the list of those (sparse),
// not as a dense product. ReLU and max-pool backward passes use bit masks
// instead of branches, because a random sign or argmax mispredicts half
// the time.
//
// Speed: BenchmarkLeNetTrainStep and BenchmarkGemm; the figures, against
// gonum and PyTorch on the same machine, are in BENCHMARKS.md ("Training on
// one worker").
//
// Every layer's and both models' gradients are checked against finite
// differences (layers_test.go, model_test.go); every optimizer against a
// step worked out by hand (optim_test.go).
package nn
