package sparse

// ThreadCPUSeconds is threadCPUSeconds for the external benchmarks.
var ThreadCPUSeconds = threadCPUSeconds

// DenseToGradientBefore is the clear-then-scan way DrainDense replaced,
// for BenchmarkDenseOverhead.
var DenseToGradientBefore = denseToGradient
