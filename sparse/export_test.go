package sparse

// ThreadCPUSeconds is threadCPUSeconds for the external benchmarks.
var ThreadCPUSeconds = threadCPUSeconds
