package main

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"text/tabwriter"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/cost"
	"github.com/meshtrain/meshtrain/mirrored/cost/calibrate"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// meshtrainPackage is the CLI the course experiment runs on every host.
const meshtrainPackage = "github.com/meshtrain/meshtrain/cmd/meshtrain"

// course is the course experiment: sparse logistic regression at Criteo's
// width on N emulated hosts, with the dense exchange and then the sparse
// one, each peer's figures beside the cost model's prediction.
func course(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("course", flag.ContinueOnError)
	n := fs.Int("n", 4, "number of hosts")
	rateName := fs.String("rate", "1.8gbit", "link rate")
	paramsFile := fs.String("params", "meshtrain-cost.json", "calibration (meshtrain model calibrate)")
	denseSteps := fs.Int("dense-steps", 8, "steps with the dense exchange")
	sparseSteps := fs.Int("sparse-steps", 1500, "steps with the sparse exchange")
	examples := fs.Int("examples", 250_000, "generated examples (the last of 5 files is the test set, unused)")
	gamma := fs.Float64("gamma", 0, "γ in ns/B for the emulated links (0: the calibrated one; hosts validate prints the fitted one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rate, err := netns.ParseRate(*rateName)
	if err != nil {
		return err
	}
	f, err := calibrate.Load(*paramsFile)
	if err != nil {
		return err
	}
	p := f.Params
	p.Beta, p.SharedCores = cost.LinkBeta(float64(rate)), float64(runtime.NumCPU())
	if *gamma > 0 {
		p.Gamma = *gamma * 1e-9
	}
	dir, err := os.MkdirTemp("", "meshtrain-course-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := netns.Build(ctx, dir, meshtrainPackage)
	if err != nil {
		return err
	}
	nb, err := netns.Build(ctx, dir, netns.NetbenchPackage)
	if err != nil {
		return err
	}
	fmt.Printf("# generating %d Criteo-like examples (D = %d)\n", *examples, data.CriteoFeatures)
	if _, err := data.GenerateCriteo(ctx, data.CriteoConfig{Out: filepath.Join(dir, "data"), Examples: *examples, Files: 5}); err != nil {
		return err
	}
	h, err := netns.Up(ctx, netns.TagForProcess(), *n, rate)
	if err != nil {
		return err
	}
	defer h.Down()
	if p.Alpha, err = probeAlpha(ctx, h, nb, p.Fixed, 25); err != nil {
		return err
	}
	fmt.Printf("# %d hosts at %s, sparse-lr D = %d, batch 100 per peer, AdaGrad, TLS; model: %s; load %s\n", *n, rate, data.CriteoFeatures, p, netns.LoadAverage())
	for _, run := range []struct {
		exchange string
		steps    int
	}{{"dense", *denseSteps}, {"sparse", *sparseSteps}} {
		sums, err := courseRun(ctx, h, bin, filepath.Join(dir, "data"), run.exchange, run.steps)
		if err != nil {
			return fmt.Errorf("%s exchange: %w", run.exchange, err)
		}
		fmt.Printf("\n## %s exchange, %d steps, load %s\n", run.exchange, run.steps, netns.LoadAverage())
		writeCourse(os.Stdout, p, run.exchange, sums)
	}
	return h.Down()
}

// probeAlpha measures α of h's links: a one-round all-gather of one
// feature takes fixed + α.
func probeAlpha(ctx context.Context, h *netns.Hosts, netbench string, fixed float64, reps int) (float64, error) {
	probe, err := netns.MeasureGather(ctx, h, netbench, []int{1}, reps)
	if err != nil {
		return 0, err
	}
	return max(0, probe[0].Median()-fixed), nil
}

// courseRun runs one `meshtrain worker` a host and returns their reports.
func courseRun(ctx context.Context, h *netns.Hosts, bin, dataDir, exchange string, steps int) ([]mirrored.Summary, error) {
	peers := make([]string, h.N)
	for i := range peers {
		peers[i] = net.JoinHostPort(h.IP(i), "7000")
	}
	dir, err := os.MkdirTemp("", "meshtrain-course-run-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	secret := "MESHTRAIN_CLUSTER_SECRET=" + hex.EncodeToString([]byte("meshtrain course experiment key!"))
	res, err := h.RunOnAll(ctx, func(i int) netns.Proc {
		cfg, _ := json.Marshal(map[string]any{"cluster": map[string]any{"worker": peers}, "task": map[string]any{"type": "worker", "index": i}})
		return netns.Proc{Env: []string{secret, "TF_CONFIG=" + string(cfg)}, Args: []string{bin, "worker", "--model", mirrored.SparseModel,
			"--features", strconv.Itoa(data.CriteoFeatures), "--train-files", filepath.Join(dataDir, "train-*"), "--batch", "100",
			"--exchange", exchange, "--max-steps", strconv.Itoa(steps), "--epochs", "100", "--lr", "0.05",
			"--report", filepath.Join(dir, fmt.Sprintf("report%d.json", i))}}
	})
	if err != nil {
		return nil, err
	}
	sums := make([]mirrored.Summary, h.N)
	for i := range sums {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("report%d.json", i)))
		if err == nil {
			err = json.Unmarshal(b, &sums[i])
		}
		if err != nil {
			return nil, fmt.Errorf("host %d's report: %w\n%s", i, err, res[i])
		}
	}
	return sums, nil
}

// writeCourse prints the per-peer table with the model's prediction of a
// step (the peer's measured compute + the predicted exchange) beside it.
func writeCourse(w *os.File, p cost.Params, exchange string, sums []mirrored.Summary) {
	n := len(sums)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rank\tsteps\tsteps/s\tsent/step\tcompute\tcomm\twait\tCPU s\tstep\tmodel: step\texchange\tbound\terror\t")
	for _, s := range sums {
		ps := s.Peer
		steps := float64(max(ps.Steps, 1))
		step := (ps.ComputeSeconds + ps.CommSeconds + ps.WaitSeconds) / steps
		sent := float64(ps.BytesSent) / steps
		tr := cost.AllGatherDirect(n, sent/float64(n-1))
		if exchange == "dense" {
			tr = cost.Ring(n, 4*float64(data.CriteoFeatures))
		}
		e := p.Estimate(tr)
		pred := ps.ComputeSeconds/steps + e.Seconds
		fmt.Fprintf(tw, "%d\t%d\t%.1f\t%.0f B\t%s\t%s\t%s\t%.1f\t%s\t%s\t%s\t%s\t%+.0f%%\t\n", ps.Rank, ps.Steps, 1/step, sent,
			cost.Seconds(ps.ComputeSeconds/steps), cost.Seconds(ps.CommSeconds/steps), cost.Seconds(ps.WaitSeconds/steps), ps.CPUSeconds,
			cost.Seconds(step), cost.Seconds(pred), cost.Seconds(e.Seconds), e.Bound, 100*(step-pred)/step)
	}
	tw.Flush()
}
