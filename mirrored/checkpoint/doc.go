// Package checkpoint is meshtrain's training state on disk: a Checkpoint
// (flat parameters, optimizer state and the run's position) stored as a
// safetensors file that Python reads with safetensors.numpy.load_file.
//
// The package holds the safetensors codec (EncodeSafetensors,
// DecodeSafetensors: the header length bounded before it is read, every
// dtype and shape checked against its bytes, the tensors tiling the data
// section exactly), the Checkpoint encoding on top of it (Encode, Decode,
// Read), and the directory of checkpoints a run keeps (Write, List,
// Latest).
//
// Invariants: a checkpoint directory holds files named FileName(step),
// each written atomically (package atomicfile), so every file there is
// complete, and List orders them by step; Decode accepts only what Encode
// can write (format "meshtrain-checkpoint/1", a "params" vector, at most an
// "optimizer_state" vector besides, a position inside its epoch), and
// every error from Read names the file.
package checkpoint
