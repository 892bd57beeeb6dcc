package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/collective/cost"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/internal/rusage"
	"github.com/meshtrain/meshtrain/mirrored/measure/bench"
	"github.com/meshtrain/meshtrain/mirrored/measure/calibrate"
	"github.com/meshtrain/meshtrain/mirrored/report"
)

// defaultCostFile is where calibrate writes and predict reads.
const defaultCostFile = "meshtrain-cost.json"

func init() {
	register(&cli.Command{
		Name:               "model",
		Usage:              "the cost model: calibrate α, β, γ on this machine, predict collectives and steps for N peers, extrapolate to 1,000",
		CustomHelpTemplate: exampleHelp("meshtrain model calibrate && meshtrain model predict -n 4 --rate 1.8gbit", cli.SubcommandHelpTemplate),
		Subcommands: []*cli.Command{
			{
				Name:               "calibrate",
				Usage:              "measure α (latency), β (stream rate), γ (CPU per byte) and the fixed cost per operation on 127.0.0.1, and write them as JSON",
				CustomHelpTemplate: withExample("meshtrain model calibrate --security tls --out meshtrain-cost.json"),
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "out", Value: defaultCostFile, Usage: "file to write"},
					&cli.StringFlag{Name: "security", Value: string(p2p.SecurityTLS), Usage: "link security: tls, noise, quic or plaintext"},
					&cli.StringFlag{Name: "link-bytes", Value: "256M", Usage: "volume of the link measurement each way"},
				},
				Action: modelCalibrate,
			},
			{
				Name:               "predict",
				Usage:              "predict ring, recursive doubling and star all-reduce, the sparse all-gather, a gossip round and a training step for N peers",
				CustomHelpTemplate: withExample("meshtrain model predict -n 4 --rate 1.8gbit --features 33762578 --touched 1000 --compute 1ms"),
				Flags:              append(modelFlags(), &cli.IntFlag{Name: "n", Value: 4, Usage: "number of peers"}, &cli.DurationFlag{Name: "compute", Usage: "measured compute per step on a core of its own (adds the step rows)"}),
				Action:             modelPredict,
			},
			{
				Name:               "extrapolate",
				Usage:              "ring against gossip and dense against sparse exchange, from 2 to --max-n peers (each on a host of its own), and where each wins",
				CustomHelpTemplate: withExample("meshtrain model extrapolate --rate 1gbit --png extrapolate.png"),
				Flags: append(modelFlags(),
					&cli.IntFlag{Name: "max-n", Value: 1000, Usage: "largest cluster"},
					&cli.StringFlag{Name: "png", Usage: "also plot the curves to this PNG file"}),
				Action: modelExtrapolate,
			},
		},
	})
}

// modelFlags are predict's and extrapolate's.
func modelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "params", Value: defaultCostFile, Usage: "calibration file (from meshtrain model calibrate)"},
		&cli.StringFlag{Name: "rate", Usage: "link rate, e.g. 100mbit, 1.8gbit (default: the calibrated loopback stream rate)"},
		&cli.DurationFlag{Name: "rtt", Usage: "the cluster's round trip, e.g. bench link's median RTT across hosts: α is half of it (default: the calibrated loopback one)"},
		&cli.StringFlag{Name: "bytes", Value: "135M", Usage: "dense vector size (K/M/G = KiB/MiB/GiB)"},
		&cli.IntFlag{Name: "features", Usage: "sparse-lr features D: the dense vector is 4·D bytes (overrides --bytes)"},
		&cli.Float64Flag{Name: "touched", Value: 1000, Usage: "distinct features each peer touches per step, for the sparse rows (0: none; a batch of 100 Criteo-like examples touches about 1,000)"},
		&cli.Float64Flag{Name: "shared-cores", Usage: "cores all peers share, for peers on one machine such as emulated hosts (0: a host per peer)"},
		&cli.Float64Flag{Name: "rank-cores", Value: 1, Usage: "cores one peer's communication work can use"},
	}
}

func modelCalibrate(c *cli.Context) error {
	if err := checkOutputs(c, output{name: "out"}); err != nil {
		return err
	}
	sec, err := p2p.ParseSecurity(c.String("security"))
	if err != nil {
		return err
	}
	vol, err := bench.ParseSizes(c.String("link-bytes"))
	if err != nil || len(vol) != 1 {
		return fmt.Errorf("--link-bytes %q: want one size like 256M", c.String("link-bytes"))
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("calibrate: finding the meshtrain binary to run its bench commands: %w", err)
	}
	m, err := calibrate.Measure(c.Context, calibrate.Config{Meshtrain: exe, Security: sec, LinkBytes: vol[0]})
	if err != nil {
		return err
	}
	p, err := cost.Fit(m)
	if err != nil {
		return err
	}
	if err := calibrate.Save(c.String("out"), calibrate.File{Params: p, Measured: m, Security: string(sec), Load: rusage.LoadAverage()}); err != nil {
		return err
	}
	fmt.Fprintf(c.App.Writer, "round trip %s, stream %.1f MB/s each way, %s all-reduce of %.0f B in %s (N=%d) and %s (N=%d), %s all-reduce of %.0f B: %s CPU (N=%d), a sparse pair coded in %.1f ns (%s, %d cores)\n%s\nwritten to %s\n",
		cost.Seconds(m.RTT), m.LinkRate/1e6, m.Small.Algo, m.Small.Bytes, cost.Seconds(m.Small.Seconds), m.Small.N, cost.Seconds(m.Many.Seconds), m.Many.N,
		m.Large.Algo, m.Large.Bytes, cost.Seconds(m.Large.CPUSeconds), m.Large.N, m.PairSeconds*1e9, sec, runtime.NumCPU(), p, c.String("out"))
	return nil
}

// modelParams reads the calibration and applies the flags to it; it
// returns the parameters and the dense vector's size.
func modelParams(c *cli.Context) (cost.Params, float64, error) {
	f, err := calibrate.Load(c.String("params"))
	if err != nil {
		return cost.Params{}, 0, err
	}
	p := f.Params
	if s := c.String("rate"); s != "" {
		bits, err := cost.ParseRate(s)
		if err != nil {
			return p, 0, fmt.Errorf("--rate: %w", err)
		}
		p.Beta = cost.LinkBeta(bits)
	}
	if rtt := c.Duration("rtt"); rtt > 0 {
		p.Alpha = rtt.Seconds() / 2
	}
	p.SharedCores, p.RankCores = c.Float64("shared-cores"), c.Float64("rank-cores")
	bytes := 4 * float64(c.Int("features"))
	if bytes == 0 {
		sz, err := bench.ParseSizes(c.String("bytes"))
		if err != nil || len(sz) != 1 {
			return p, 0, fmt.Errorf("--bytes %q: want one size like 135M", c.String("bytes"))
		}
		bytes = float64(sz[0])
	}
	return p, bytes, p.Validate()
}

func modelPredict(c *cli.Context) error {
	p, bytes, err := modelParams(c)
	if err != nil {
		return err
	}
	q := cost.Question{N: c.Int("n"), Bytes: bytes, Touched: c.Float64("touched"), Compute: c.Duration("compute").Seconds()}
	if q.N < 2 {
		return fmt.Errorf("-n %d: want at least 2 peers", q.N)
	}
	fmt.Fprintf(c.App.Writer, "# meshtrain model: N=%d, dense vector %.0f B; %s\n", q.N, q.Bytes, p)
	return cost.WriteRows(c.App.Writer, p.Predict(q))
}

func modelExtrapolate(c *cli.Context) error {
	if err := checkOutputs(c, output{name: "png"}); err != nil {
		return err
	}
	p, bytes, err := modelParams(c)
	if err != nil {
		return err
	}
	p.SharedCores = 0 // a thousand peers do not share one machine
	k := c.Float64("touched")
	pts := p.Extrapolate(cost.Sizes(c.Int("max-n")), bytes, bytes/4, k)
	w := c.App.Writer
	fmt.Fprintf(w, "# meshtrain model: a host per peer; dense vector %.0f B, %.0f touched features per peer; %s\n", bytes, k, p)
	if err := cost.WriteExtrapolation(w, pts); err != nil {
		return err
	}
	if path := c.String("png"); path != "" {
		if err := report.SavePanels(path, report.Extrapolation(pts)); err != nil {
			return err
		}
		fmt.Fprintf(w, "plotted to %s\n", path)
	}
	return nil
}
