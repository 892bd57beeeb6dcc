// Package nn holds meshtrain's models: a library of layers composed into
// chains (Sequential) and graphs (Graph), their losses, optimizers and
// learning-rate schedules, written for speed on one or two CPU cores.
// The built-in models, LeNet-5 (61,706 parameters) and softmax regression
// (7,850), are Sequential definitions (lenetLayers, softmaxLayers) that
// NewModelFor builds for any image set: any number of classes, and for
// softmax regression any image size. They keep their PyTorch module
// names (conv1.weight …; weight, bias); other models name their tensors
// as torch.nn.Sequential does (0.weight …).
//
// Layers. A LayerSpec describes a layer without its input size: Conv2D
// (valid or same padding, any kernel size and stride along each axis,
// dilation, with or without a bias), DepthwiseConv2D (one group per input
// channel, with a depth multiplier), MaxPooling2D, AveragePooling2D,
// GlobalAveragePooling2D, GlobalMaxPooling2D, ZeroPadding2D, Cropping2D,
// UpSampling2D (nearest), Flatten, Reshape, Dense, Dropout, Activation
// (relu, tanh, sigmoid, softmax, linear, and elu, selu, gelu, swish,
// softplus, softsign, hard_sigmoid …: see pointwiseFns), LeakyReLU, ELU,
// PReLU, BatchNormalization, LayerNormalization, Rescaling and
// Normalization (fixed per-channel affine maps, Keras's preprocessing
// layers); for text, Embedding, Conv1D, MaxPooling1D, AveragePooling1D,
// GlobalMaxPooling1D and GlobalAveragePooling1D; and the merges of several
// inputs: Add, Subtract, Multiply, Average, Maximum, Minimum
// (broadcasting sizes of 1 as Keras does) and Concatenate (merge.go;
// Concatenate joins channels, rows or columns, mapping Keras's
// channels-last axis onto the planar layout). Each layer's shape is
// inferred from its input's (H×W×C, written channels last as Keras does);
// a shape a layer cannot take is a *LayerError naming the layer. A final
// softmax or sigmoid is fused with its cross-entropy. Conv2D,
// DepthwiseConv2D and Dense take Keras's initializers (Initializer)
// besides nn's own Init kinds.
//
// Sequences. A sequence of L steps of C channels is the image 1×L×C
// (Shape{H: 1, W: L, C: C}), planar as every image: C×L, channel by
// channel, as PyTorch's Conv1d takes N×C×L. A text model's input is a
// vector of L token ids (Shape{C: L}), each id an integer in float32, as
// the data sets of token sequences give them; an Embedding turns it into
// the sequence 1×L×D. The 1-D layers take sequences only (H = 1); the
// element-wise layers, LayerNormalization (over C at each step), PReLU
// (a slope per channel), BatchNormalization and Dropout take them as any
// image. A model whose first layer is an Embedding checks every batch's
// ids before any pass: an id that is not an integer in [0, input_dim) is
// ForwardBackward's or Evaluate's error, naming the example and position,
// as Keras fails on it.
//
// The registry. Each layer kind lives in one file (conv.go, pool.go,
// dense.go, activation.go, reshape.go, dropout.go, batchnorm.go, add.go,
// merge.go, depthwise.go, global_pool.go, pad2d.go, upsampling.go,
// rescaling.go; pointwise.go, prelu.go, layernorm.go, embedding.go,
// conv1d.go, pool1d.go, globalpool1d.go): its spec, its kernels, its JSON
// (encode, and a decoder registered under its "type" in registry.go's
// layerKinds), its bounds (bounder) and the gradient check of its test
// file. Nothing else switches on the kinds, so
// a new kind is one file; package nn/keras maps Keras's classes to these
// specs through one table.
//
// Graphs. A Sequential runs its layers one after the other; a Graph runs
// Nodes, each taking the outputs of earlier nodes or the input (a
// residual block's Add takes its branch and its input), and a chain is
// the Graph whose nodes each take the one before. The Sequential stays
// the fast path for chains: it fuses conv → ReLU → max-pool and runs its
// first layers a few examples at a time; a Graph computes the same
// function to rounding (TestGraphChainMatchesSequential).
//
// Architectures. A model's definition is data: an Architecture (name,
// input shape, layers, and for a graph each layer's Inputs), whose
// canonical JSON checkpoints record so that a model can be rebuilt from
// its checkpoint (Build), and whose Digest peers compare. A chain's JSON
// has the format ArchitectureFormat, unchanged since checkpoints first
// recorded it, so old digests hold; a graph's has GraphFormat, each layer
// with its "inputs". ParseArchitecture reads either back strictly and
// checks it without allocating the model (Check, bounded by MaxParams);
// package nn/keras reads one from the JSON Keras writes.
//
// Buffers and modes. Besides its parameters, a model may hold
// non-trainable buffers (Stateful): BatchNormalization's moving mean and
// variance, named as PyTorch's state_dict names buffers
// ("1.running_mean"). They live in one flat vector, like the parameters,
// so a data-parallel trainer checkpoints, compares and broadcasts them in
// one piece. The mode is the call: ForwardBackward is a training pass
// (batch statistics, dropout on, buffers updated once at its end),
// Evaluate an inference pass (moving statistics, dropout off, buffers
// only read); there is no mode to set and so none to forget. Sequential
// and Graph are Stateful; a model without buffers has an empty vector.
//
// Layout: images are planar, C×H×W per example (PyTorch's NCHW), which for
// one channel is the same bytes as H×W×C; Flatten and Reshape keep that
// order, so a Dense after a Flatten takes its inputs channel by channel as
// PyTorch's does (see Shape).
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
//   - Dropout's masks are a hash of the seed, the layer and the step's
//     place in a run (Stepper: rank, epoch, step) and of each input's index
//     in the batch, so they do not depend on how the batch is sharded.
//   - The same seed gives bitwise-identical parameters and training. A
//     model splits each batch into DefaultShards parts, each with its own
//     layers, scratch and gradient buffer; the parts run on their own
//     goroutines when GOMAXPROCS > 1 and in turn otherwise, and the partial
//     gradients are summed in part order, so GOMAXPROCS does not change a
//     bit of the result.
//   - Buffers change only at the end of ForwardBackward, from the whole
//     batch's statistics combined from the parts in part order (each part
//     is normalised with its own statistics, as each replica's is under
//     DDP without SyncBatchNorm), so GOMAXPROCS does not change them
//     either. Every shard's copy of a layer reads the one buffer vector.
//   - Synchronized batch normalization (BatchNormSyncer, as PyTorch's
//     SyncBatchNorm) normalises over the global batch: the shards meet
//     at each BatchNormalization, forward and backward (nn/statsync), so
//     they then always run on goroutines, and their float64 sums, in
//     shard order, go to a StatsReducer that sums them over the replicas
//     in rank order: every shard of every replica gets the same bits.
//
// Compute: the matrix products are this package's own AVX2+FMA assembly
// kernels (gemm_amd64.s: a 4×16 register-tiled A·B and a 3×4 tile of dot
// products for A·Bᵀ), with portable Go loops on other CPUs (build tag
// purego forces them). Where the CPU has AVX-512 (avx512_amd64.s), A·B and
// the grid convolutions take 64 columns at a time with the very bits of
// the AVX2 kernels (the same FMAs in the same order per element), A·Bᵀ
// with dot products longer than 2048 (a dense layer after a large feature
// map) runs on 4×6 tiles of 16-lane dot products in blocks of k that stay
// in L2, and a fused 3×3 convolution → ReLU → max-pool over a multiple of
// 16 input channels takes its backward pass channels last (conv_hwc.go:
// each routed gradient adds its window to 18 registers of weight
// gradient, or its kernel to the input gradient). The Keras MNIST CNN's
// step, in BENCHMARKS.md ("The classic Keras CNN against PyTorch"), runs
// mostly on these. gonum's blas32 was the first candidate; its
// float32 kernels are 4-wide SSE axpy and dot loops without FMA or
// register tiling, and on LeNet's shapes BenchmarkGemm measured it several
// times slower than these kernels (figures in BENCHMARKS.md).
// Convolutions need no im2col matrix: each example's input is laid out on
// a padded grid and the kernels read its shifted windows through a table
// of offsets (see conv2D), for the output, the weight gradient and the
// input gradient alike; the im2col copies had cost more than the GEMMs'
// wasted junk columns; a dilated kernel is only a table of wider
// offsets, and a stride keeps every S-th row and column of the stride-1
// grid (along each axis its own), except a stride of 2 along both axes
// without dilation (ResNet's downsampling): its grid is laid out as the
// input's four phases (even and odd rows by even and odd columns), on
// which every tap is a stride-1 window, so it computes only its outputs
// (conv_phase.go). In a Graph, a convolution that only batch
// normalizations take (whose output gradient is dense) computes its
// input gradient as the full correlation of that gradient with the
// flipped kernels on the forward kernels (conv_full.go), instead of the
// product Wᵀ·dy written out and summed back; if it is 3×3, stride 1,
// padded by one, on an even image of at least 8 channels (ResNet's),
// all three passes go by Winograd's F(2×2, 3×3) instead (conv_wino.go,
// nn/internal/wino: 2.25× fewer products, float32 results within a few
// units in the last place of the direct ones, the same bits on every
// replica); BatchNormalization's passes
// are AVX2 kernels of their own (batchnorm_amd64.s: float64 sums,
// float32 affine maps). ResNet-20's step: BenchmarkResNet20TrainStep in
// nn/keras, figures in BENCHMARKS.md ("ResNet-20 in nn.Graph"). A depthwise convolution is, channel by
// channel, a convolution of one input channel, and runs on one such
// grid convolution pointed at each channel's kernels in turn
// (depthwise.go). A Sequential runs a conv → ReLU → 2×2 max-pool
// stage (either order: ReLU and max-pooling commute) as one layer
// (convPoolReLU; square, undilated and of stride 1, with or without a
// bias): the pooling, bias and ReLU run in one AVX2 pass over
// the convolution's grid and keep only a one-hot code per window, whose
// gradient pass writes straight onto the grid. Max-pooling leaves at most
// one gradient per window, so the weight gradient of a convolution with
// many taps (LeNet's conv2) is computed from the list of those (sparse),
// not as a dense product; a convolution on its own takes the same path
// when its output gradient is mostly zeros. The generic layers have AVX2
// kernels of their own (layers_amd64.s), and a Sequential runs its
// leading convolution, pooling, activation and dropout layers two
// examples at a time, keeping the activations no backward pass reads in
// buffers of two examples, so one layer's output is still in cache when
// the next reads it (chunker, reader). LeNet from separate layers against
// the fused one: BenchmarkLeNetGenericTrainStep, figures in BENCHMARKS.md
// ("The layer library").
// ReLU and max-pool backward passes use bit masks instead of branches,
// because a random sign or argmax mispredicts half the time.
//
// Speed: BenchmarkLeNetTrainStep and BenchmarkGemm; the figures, against
// gonum and PyTorch on the same machine, are in BENCHMARKS.md ("Training on
// one worker").
//
// Every layer kind and option and whole models' gradients, chains and
// graphs, are checked against finite differences (layers_test.go and
// each kind's test file, sequential_test.go, graph_test.go,
// model_test.go); BatchNormalization's moving statistics and every
// optimizer against steps worked out by hand (batchnorm_test.go,
// optim_test.go).
package nn
