package mirrored

import (
	"math"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/collective/half"
	"github.com/meshtrain/meshtrain/mirrored/replica"
	"github.com/meshtrain/meshtrain/sparse"
)

// TestWireHalfIdenticalReplicas: with the gradient in bf16 or fp16 on the
// wire (Half), 2 and 3 replicas over the in-memory transport, exchanging
// in buckets, end bitwise identical, differ from float32's run, learn as
// well, and send about half its bytes.
func TestWireHalfIdenticalReplicas(t *testing.T) {
	mn := synthMNIST(360, 60, 11)
	base := testJob(t, "", mn, 8, 1)
	base.NewModel = smallCNN
	base.GradientBucket = 16 << 10
	for _, n := range []int{2, 3} {
		plain, errs := runGroup(t, same(n, base))
		for r, err := range errs {
			if err != nil {
				t.Fatalf("n=%d fp32, rank %d: %v", n, r, err)
			}
		}
		for _, f := range []half.Format{half.BF16, half.FP16} {
			job := base
			job.Combiner = replica.Half{Format: f}
			sums, errs := runGroup(t, same(n, job))
			for r, err := range errs {
				if err != nil {
					t.Fatalf("n=%d %s, rank %d: %v", n, f, r, err)
				}
			}
			for r := 1; r < n; r++ {
				if sums[r].Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 {
					t.Fatalf("n=%d %s: rank %d ends with %s, rank 0 with %s", n, f, r, sums[r].Run.ParamsSHA256, sums[0].Run.ParamsSHA256)
				}
			}
			if sums[0].Run.ParamsSHA256 == plain[0].Run.ParamsSHA256 {
				t.Fatalf("n=%d %s ended with float32's bits: the gradient did not travel in 16 bits", n, f)
			}
			if acc, ref := sums[0].Run.FinalAccuracy, plain[0].Run.FinalAccuracy; math.Abs(acc-ref) > 0.05 {
				t.Errorf("n=%d %s: accuracy %.3f, float32 %.3f", n, f, acc, ref)
			}
			// The start-up broadcast and the evaluation's sums stay in
			// float32, so the run as a whole sends a little over half.
			got, ref := sums[0].Peer.BytesSent, plain[0].Peer.BytesSent
			ratio := float64(got) / float64(ref)
			t.Logf("n=%d %s: accuracy %.3f (fp32 %.3f), rank 0 sent %d bytes (fp32 %d, ratio %.3f)", n, f, sums[0].Run.FinalAccuracy, plain[0].Run.FinalAccuracy, got, ref, ratio)
			if ratio < 0.45 || ratio > 0.57 {
				t.Errorf("n=%d %s: rank 0 sent %d bytes, float32 %d (ratio %.3f): want about half", n, f, got, ref, ratio)
			}
		}
	}
}

// TestWireMismatchNamed: a replica with another wire format is refused at
// start-up, naming the setting and who holds which value.
func TestWireMismatchNamed(t *testing.T) {
	mn := synthMNIST(120, 30, 4)
	job := testJob(t, "softmax", mn, 8, 1)
	for _, tc := range []struct {
		formats []half.Format
		want    string
	}{
		{[]half.Format{half.FP32, half.BF16}, "wire is fp32 on rank 0 but bf16 on rank 1"},
		{[]half.Format{half.FP16, half.BF16, half.FP16}, "wire is fp16 on ranks 0, 2 but bf16 on rank 1"},
	} {
		jobs := same(len(tc.formats), job)
		for r, f := range tc.formats {
			if f.Half() {
				jobs[r].Combiner = replica.Half{Format: f}
			}
		}
		_, errs := runGroup(t, jobs)
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, rank %d: %v, want %q", tc.formats, r, err, tc.want)
			}
		}
	}
}

// TestWireHalfSparseDense: sparse-lr's dense exchange with the gradient
// sum in 16 bits keeps 3 replicas bitwise identical, stays close to the
// float32 exchange's weights, moves about half its bytes, and the
// replicas compare the format by name.
func TestWireHalfSparseDense(t *testing.T) {
	const dim, batch, n = 3000, 8, 3
	train := sparseSet(t, 1, 600, dim, 6)
	job := sparseTestJob(train, nil, dim, batch, 2, "adagrad", sparse.ExchangeDense)
	plain, ref, errs := runSparse(t, sameSparse(n, job))
	for r, err := range errs {
		if err != nil {
			t.Fatalf("fp32, rank %d: %v", r, err)
		}
	}
	for _, f := range []half.Format{half.BF16, half.FP16} {
		jobs := sameSparse(n, job)
		for r := range jobs {
			jobs[r].Sparse.Wire = f
		}
		sums, ws, errs := runSparse(t, jobs)
		for r, err := range errs {
			if err != nil {
				t.Fatalf("%s, rank %d: %v", f, r, err)
			}
		}
		for r := 1; r < n; r++ {
			if sums[r].Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 {
				t.Fatalf("%s: rank %d ends with %s, rank 0 with %s", f, r, sums[r].Run.ParamsSHA256, sums[0].Run.ParamsSHA256)
			}
		}
		if sums[0].Run.ParamsSHA256 == plain[0].Run.ParamsSHA256 {
			t.Fatalf("%s ended with float32's bits: the dense exchange did not use the wire", f)
		}
		for i := range ws[0] {
			if d := math.Abs(float64(ws[0][i] - ref[0][i])); d > 0.02*(1+math.Abs(float64(ref[0][i]))) {
				t.Fatalf("%s: weight %d is %g, float32's %g", f, i, ws[0][i], ref[0][i])
			}
		}
		ratio := float64(sums[0].Peer.BytesSent) / float64(plain[0].Peer.BytesSent)
		t.Logf("%s: rank 0 sent %d bytes, float32 %d (ratio %.3f)", f, sums[0].Peer.BytesSent, plain[0].Peer.BytesSent, ratio)
		if ratio < 0.45 || ratio > 0.6 {
			t.Errorf("%s: ratio %.3f of float32's bytes, want about half", f, ratio)
		}
	}
	jobs := sameSparse(2, job)
	jobs[1].Sparse.Wire = half.BF16
	_, _, errs = runSparse(t, jobs)
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "wire is fp32 on rank 0 but bf16 on rank 1") {
			t.Fatalf("rank %d: %v, want the wire named", r, err)
		}
	}
}
