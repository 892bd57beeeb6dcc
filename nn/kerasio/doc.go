// Package kerasio moves a model's weights between nn and Keras: it lays
// an nn model's parameters and buffers out as Keras holds them (Export),
// and Keras's weights out as nn holds them (Import), so that a model
// read from a Keras file computes, with Keras's weights, the function
// Keras computes; and it reads and writes TensorFlow.js layers models,
// model.json with its weightsManifest and weight files (ReadTFJSWeights,
// WriteTFJS).
//
// nn keeps its own layouts in the hot path: images planar (C×H×W, as
// PyTorch), Flatten in that order, PyTorch's weight layouts. Keras's
// arithmetic is had at the boundary. A convolution's kernel is Keras's
// [kh, kw, in, out] and nn's [out, in, kh, kw]; a Dense's is [in, out]
// against [out, in]; BatchNormalization's gamma, beta, moving_mean and
// moving_variance are nn's weight, bias, running_mean and running_var.
// A vector flattened from an H×W×C map is in H×W×C order in Keras and
// C×H×W in nn, so a Dense after a Flatten gets its kernel's input rows
// permuted (and so does a BatchNormalization of that vector), and a
// Dense whose output a Reshape makes an image gets its output columns
// permuted; where no Dense can make up for the order (a Reshape of an
// image of several channels into another shape), Export and Import
// refuse, naming the layer.
//
// The one table of this is rules (table.go, with the rows of the image
// layers in table2d.go, the text layers in table1d.go and the merges in
// tablemerge.go), keyed by nn's kind (nn.Kind's first word): each kind's
// weights (nn's tensor, Keras's weight, in Keras's order), how the layer
// passes on a vector's order, and the Keras layer it is written as. A
// kind nn learns is one row; a kind without one is refused by name, not
// converted wrongly, and TestEveryKindHasARow fails until it has one.
//
// Invariants: Import after Export gives back the same floats, bit for
// bit (every conversion is a permutation); a manifest's weights are
// matched to the model's by name and shape before any file is opened,
// and nothing is read from a file before its size is checked against
// what the manifest says it holds.
package kerasio
