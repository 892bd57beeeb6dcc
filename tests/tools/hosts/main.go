// Command hosts brings emulated hosts (package netns) up and down by hand,
// and measures their links. It needs root.
//
//	go run ./tests/tools/hosts up N RATE   # e.g. up 3 1gbit: mtncli-h0.. at 10.77.0.1..
//	go run ./tests/tools/hosts down        # removes them (and clusters left by killed tests)
//	go run ./tests/tools/hosts bench [-n 2,4] [-rate 1gbit,1.8gbit] [-mib 16,64] [-runs 5]
//	go run ./tests/tools/hosts hier [-n 2] [-per-host 2] [-rate 1gbit] [-mib 64] [-pairs 5] [-security tls] [-intra-host auto|tls]
//	go run ./tests/tools/hosts validate [-n 2,3,4] [-rate 1.8gbit,1gbit,100mbit] [-params meshtrain-cost.json] [-out DIR] [-replot POINTS] [-fits K] [-fit-only]
//	go run ./tests/tools/hosts course [-n 4] [-rate 1.8gbit] [-params meshtrain-cost.json] [-gamma NS] [-dense-runs 5]
//
// Between up and down, run anything on host i with
// `ip netns exec mtncli-h<i> COMMAND`, e.g. one `meshtrain worker` a host
// with a TF_CONFIG listing 10.77.0.1:7000, 10.77.0.2:7000, ….
//
// bench brings up a cluster for every rate and N, and for each of -runs
// runs measures raw TCP around the ring and then meshtrain's all-reduce of
// every size, one after the other, and prints one line a run and size:
// the median of -reps timed all-reduces (each rep listed too), the raw TCP
// rate (mean over the hosts), their ratio, the CPU time of all peers per
// all-reduce and the load average. -window overrides meshtrain's stream
// window in the measuring processes, -muxer picks the stream multiplexer
// (mesh or yamux) and -chunk the ring's chunk, for experiments. -raw-tls
// also measures raw TLS around the ring (crypto/tls alone, no libp2p, no
// framing, no fold) after raw TCP, and adds its rate and the all-reduce's
// ratio to it: the most any TLS all-reduce could reach on these hosts
// with this machine's CPUs.
//
// hier runs -per-host peers on each of -n hosts and compares the flat
// ring with what Auto chooses there (the hierarchical all-reduce): -pairs
// alternating pairs of runs, one line a run (its median busbw of -reps,
// each rep, the CPU of all peers per all-reduce, the load average), then
// the medians over the pairs and their ratio.
//
// validate checks the cost model (collective/cost) against the hosts: for
// each rate and N it times the ring, recursive doubling and star
// all-reduces, the sparse all-gather of a step and a gossip round at
// several sizes (sizes whose transfer would take over 4 s are skipped),
// and prints each point, the median of its repetitions with their spread,
// with the model's prediction (β and tbf's bucket from the rate; α and the
// CPU of a message fitted first, from 4 KiB rings, trees and stars on 2,
// 3 and 4 hosts at the first rate, each the median of five runs after a
// warm-up run (-fits K fits K times and takes the median, -fit-only stops
// there); γ on the first cluster; the rest from `meshtrain model
// calibrate`), the error, the bound and the goal it counts towards; every
// point goes to OUT/points.json, the figure to OUT/cost-model.png. Each
// timed repetition starts after the links idled long enough to refill
// tbf's bucket.
//
// course is the course experiment: `meshtrain worker --model sparse-lr` at
// Criteo's width (33,762,578 features, generated data) on N hosts, first
// with the dense exchange, then the sparse one; each peer's steps/s, bytes
// sent and compute/comm/wait per step, with the model's step (the peer's
// measured compute and input wait + the predicted exchange) and its bound
// beside them; for the dense runs, the exchange against the ring's
// bandwidth bound and the CPU a step beyond a short start-up run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/meshtrain/meshtrain/tests/netns"
)

// tag names the cluster of `hosts up`.
const tag = "cli"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "hosts:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New("usage: hosts up N RATE | down | bench [flags] | hier [flags] | validate [flags] | course [flags]")
	}
	if err := netns.Available(); err != nil {
		return err
	}
	switch args[0] {
	case "up":
		return up(ctx, args[1:])
	case "down":
		return errors.Join(netns.Remove(tag), netns.RemoveStale())
	case "bench":
		return bench(ctx, args[1:])
	case "hier":
		return hier(ctx, args[1:])
	case "validate":
		return validate(ctx, args[1:])
	case "course":
		return course(ctx, args[1:])
	}
	return fmt.Errorf("unknown command %q: want up, down, bench, hier, validate or course", args[0])
}

func up(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return errors.New("usage: hosts up N RATE (e.g. hosts up 3 1gbit)")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return fmt.Errorf("N %q: want a number of hosts", args[0])
	}
	rate, err := netns.ParseRate(args[1])
	if err != nil {
		return err
	}
	if names, _ := netns.Namespaces(); len(names) > 0 && strings.Contains(strings.Join(names, " "), netns.Prefix+tag+"-") {
		return errors.New("hosts are already up: run `hosts down` first")
	}
	h, err := netns.Up(ctx, tag, n, rate)
	if err != nil {
		return err
	}
	for i := range n {
		fmt.Printf("host %d: namespace %s, address %s, %s each way\n", i, h.Namespace(i), h.IP(i), rate)
	}
	fmt.Println("remove them with: hosts down")
	return nil
}

func bench(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	ns := fs.String("n", "2,4", "numbers of hosts, comma-separated")
	rates := fs.String("rate", "1gbit,1.8gbit", "link rates, comma-separated")
	mib := fs.String("mib", "16,64", "all-reduce sizes in MiB, comma-separated")
	runs := fs.Int("runs", 5, "runs per rate and N")
	reps := fs.Int("reps", 3, "timed all-reduces per size and run (the run reports their median)")
	sec := fs.String("security", "tls", "link security: tls, noise or plaintext")
	tcpTime := fs.Duration("tcp-duration", time.Second, "how long raw TCP sends in each run")
	window := fs.Int("window", 0, "stream window in bytes (0: meshtrain's default; for experiments)")
	muxer := fs.String("muxer", "mesh", "stream multiplexer: mesh or yamux")
	chunk := fs.Int("chunk", 0, "ring chunk in bytes (0: meshtrain's default)")
	rawTLS := fs.Bool("raw-tls", false, "also measure raw TLS around the ring (the cipher's ceiling)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var sizes []int64
	for _, f := range strings.Split(*mib, ",") {
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return fmt.Errorf("-mib %q: want sizes in MiB, e.g. 16,64", *mib)
		}
		sizes = append(sizes, int64(v)<<20)
	}
	bin, remove, err := buildNetbench(ctx)
	if err != nil {
		return err
	}
	defer remove()
	head := "rate\tN\trun\tsize\tbusbw(MB/s)\treps(MB/s)\trawTCP(MB/s)\tratio\tcpu(s)\tload"
	if *rawTLS {
		head += "\trawTLS(MB/s)\tratio to rawTLS"
	}
	fmt.Println(head)
	return eachCluster(*rates, *ns, func(rate netns.Rate, n int) error {
		return benchCluster(ctx, bin, rate, n, sizes, *runs, *reps, *sec, *tcpTime, *rawTLS, "-window", strconv.Itoa(*window), "-muxer", *muxer, "-chunk", strconv.Itoa(*chunk))
	})
}

// eachCluster calls f for every rate in rates and number of hosts in ns
// (comma-separated flags), rate by rate.
func eachCluster(rates, ns string, f func(rate netns.Rate, n int) error) error {
	for _, rs := range strings.Split(rates, ",") {
		rate, err := netns.ParseRate(rs)
		if err != nil {
			return err
		}
		for _, s := range strings.Split(ns, ",") {
			n, err := strconv.Atoi(s)
			if err != nil {
				return fmt.Errorf("-n %q: want numbers of hosts", s)
			}
			if err := f(rate, n); err != nil {
				return err
			}
		}
	}
	return nil
}

// benchCluster measures one rate and N for runs runs.
func benchCluster(ctx context.Context, bin string, rate netns.Rate, n int, sizes []int64, runs, reps int, sec string, tcpTime time.Duration, rawTLS bool, extra ...string) error {
	h, err := netns.Up(ctx, netns.TagForProcess(), n, rate)
	if err != nil {
		return err
	}
	defer h.Down()
	for run := 1; run <= runs; run++ {
		tcp, err := netns.MeasureTCP(ctx, h, bin, tcpTime)
		if err != nil {
			return err
		}
		var tlsRate float64
		if rawTLS {
			rs, err := netns.MeasureTCP(ctx, h, bin, tcpTime, "-tls")
			if err != nil {
				return err
			}
			tlsRate = netns.MeanRate(rs)
		}
		ar, err := netns.MeasureAllReduce(ctx, h, bin, sec, sizes, reps, extra...)
		if err != nil {
			return err
		}
		raw := netns.MeanRate(tcp)
		for _, r := range ar {
			var each []string
			for _, b := range r.BusBW {
				each = append(each, fmt.Sprintf("%.1f", b/1e6))
			}
			line := fmt.Sprintf("%s\t%d\t%d\t%dMiB\t%.1f\t%s\t%.1f\t%.3f\t%.2f\t%s", rate, n, run, r.Bytes>>20, r.Median()/1e6,
				strings.Join(each, ","), raw/1e6, r.Median()/raw, r.CPUSeconds, netns.LoadAverage())
			if rawTLS {
				line += fmt.Sprintf("\t%.1f\t%.3f", tlsRate/1e6, r.Median()/tlsRate)
			}
			fmt.Println(line)
		}
	}
	return h.Down()
}

// buildNetbench builds the measuring program into a temporary directory,
// which remove deletes.
func buildNetbench(ctx context.Context) (bin string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "meshtrain-netbench-")
	if err != nil {
		return "", nil, err
	}
	if bin, err = netns.Build(ctx, dir, netns.NetbenchPackage); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}
