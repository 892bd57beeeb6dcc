package mirrored

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/keras"
)

// TestKerasGraphOnTwoPeers: Functional models read from Keras files
// train on 2 replicas, which end with the same parameters and moving
// statistics (compared every few steps too), the statistics having
// moved from their initial values: branches joined by Concatenate,
// normalised and Added back to the stem (tf.keras 2's form), and a
// depthwise-separable branch beside a 1×1 one joined by Concatenate
// (Keras 3's form and TensorFlow.js's, one architecture, which train to
// the same bits).
func TestKerasGraphOnTwoPeers(t *testing.T) {
	ends := map[string]string{}
	for _, file := range []string{"concat_add_tfkeras2.json", "depthwise_branches_keras3.json", "tfjs_depthwise_branches.json"} {
		t.Run(file, func(t *testing.T) {
			m, err := keras.ReadFile(filepath.Join("..", "nn", "keras", "testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			if m.Arch.Inputs == nil {
				t.Fatal("the file read as a chain, not a graph")
			}
			job := testJob(t, "", synthMNIST(240, 60, 5), 8, 2)
			job.NewModel, job.HashEvery = m.NewModel, 3
			sums, errs := runGroup(t, same(2, job))
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			a, b := sums[0].Run, sums[1].Run
			if a.ParamsSHA256 == "" || a.BuffersSHA256 == "" {
				t.Fatalf("hashes %q and %q: the parameters or the buffers were not seen", a.ParamsSHA256, a.BuffersSHA256)
			}
			if a.ParamsSHA256 != b.ParamsSHA256 || a.BuffersSHA256 != b.BuffersSHA256 {
				t.Fatalf("rank 1 ends with params %s buffers %s, rank 0 with %s and %s", b.ParamsSHA256, b.BuffersSHA256, a.ParamsSHA256, a.BuffersSHA256)
			}
			fresh, err := m.NewModel(nn.MNISTSpec, job.Seed, 2)
			if err != nil {
				t.Fatal(err)
			}
			if a.BuffersSHA256 == ParamsHash(fresh.(nn.Stateful).Buffers()) || a.ParamsSHA256 == ParamsHash(fresh.Params()) {
				t.Fatal("the parameters or the moving statistics never moved")
			}
			t.Logf("%d steps, final accuracy %.3f, params %s, buffers %s", a.Steps, a.FinalAccuracy, a.ParamsSHA256[:12], a.BuffersSHA256[:12])
			ends[file] = a.ParamsSHA256 + a.BuffersSHA256
			if a.Steps != 2*240/(2*8) || a.FinalAccuracy < 0.3 {
				t.Errorf("%d steps, final accuracy %.3f: want 30 steps and above chance", a.Steps, a.FinalAccuracy)
			}
		})
	}
	if k3, js := ends["depthwise_branches_keras3.json"], ends["tfjs_depthwise_branches.json"]; k3 == "" || k3 != js {
		t.Errorf("one architecture in Keras 3's and TensorFlow.js's forms ends at %q and %q", k3, js)
	}
}
