// Package checkpoint is meshtrain's training state on disk: a Checkpoint
// (flat parameters, optimizer state and the run's position) stored as a
// safetensors file of one tensor per layer under PyTorch's names and
// shapes (its Layout), which PyTorch's load_state_dict takes.
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
// complete (RemoveTemps clears what a killed writer left), and List orders
// them by step. Every file Encode writes carries a digest (Digest) over
// its tensors and metadata, and its header is spelled exactly as Encode
// spells it; Decode accepts only what Encode can write (format Format,
// F32 tensors each listed once in the metadata's param_order or
// state_order, at least one parameter, finite values, a position inside
// its epoch, the digest matching), a FormatV2 file under the same checks
// but with one "params" vector and at most an "optimizer_state" vector
// besides (decoded with an empty Layout), or a FormatV1 file from before
// the digest, marked Unverified. Any other file is
// ErrDamaged (or from a newer meshtrain), and every error from Read names
// the file.
package checkpoint
