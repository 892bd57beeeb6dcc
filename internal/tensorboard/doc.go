// Package tensorboard writes TensorBoard event files natively: TFRecord
// framing (data/tfrecord) around Event protocol buffers encoded by hand
// with protowire, so no TensorFlow or generated code is needed.
//
// Each worker writes its own directory (WorkerDir), so that workers of one
// run never overwrite each other's logs and TensorBoard shows one run per
// worker. A file starts with an Event whose file_version is
// "brain.Event:2"; every later Event carries one scalar Summary (tag,
// simple_value) with its step and wall time. The file name is
// events.out.tfevents.<unix seconds>.<host>.<pid>.<sequence>.v2, as
// TensorFlow names its own, so a restart never appends to or overwrites
// another file.
//
// The fields written (field numbers from tensorflow/core/util/event.proto
// and summary.proto):
//
//	Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//	Summary { repeated Value value = 1; }
//	Value   { string tag = 1; float simple_value = 2; }
//
// ReadFile decodes such files back (checking every record's CRCs) and is
// what the tests use.
package tensorboard
