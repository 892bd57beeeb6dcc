package main

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/half"
	"github.com/meshtrain/meshtrain/collective/p2p"
	"github.com/meshtrain/meshtrain/mirrored/launch"
	"github.com/meshtrain/meshtrain/mirrored/launch/cluster"
	"github.com/meshtrain/meshtrain/mirrored/measure/bench"
)

func benchClusterFlags(defaultN int) []cli.Flag {
	return append([]cli.Flag{
		&cli.IntFlag{Name: "n", Value: defaultN, Usage: "number of local peers (without --tf-config)"},
		&cli.StringFlag{Name: "tf-config", Usage: "run as one peer of a cluster across hosts described by this TF_CONFIG file (one bench per host, as with worker; " + launch.SecretEnv + " as for worker); rank 0 prints the results"},
		&cli.StringFlag{Name: "identity", Usage: "with --tf-config: this peer's libp2p key file, for a TF_CONFIG of /p2p/ multiaddrs"},
		&cli.StringFlag{Name: "secret-file", EnvVars: []string{launch.SecretFileEnv}, Usage: "with --tf-config: read the cluster secret from this file (mode 600) instead of " + launch.SecretEnv + ", as worker does"},
		&cli.StringFlag{Name: "security", Value: "tls", Usage: "link security: tls, noise, quic or plaintext"},
		&cli.StringFlag{Name: "intra-host", Value: string(p2p.IntraHostAuto), Usage: "links between peers on one host, as one user: auto (shared memory, authenticated by the kernel's peer credentials and the cluster secret; no cipher) or tls (over --security, as between hosts)"},
		&cli.StringFlag{Name: "muxer", Value: string(p2p.MuxerMesh), Usage: "stream multiplexer of TCP links: mesh (copy-free) or yamux (go-yamux, for comparison); every peer must use the same"},
		&cli.BoolFlag{Name: "in-process", Usage: "run the peers as goroutines of this process instead of separate processes"},
		&cli.DurationFlag{Name: "collective-timeout", Value: collective.DefaultTimeout, Usage: "deadline of every collective and of connecting"},
		&cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table"},
		&cli.IntFlag{Name: "gomaxprocs", Usage: "GOMAXPROCS of each peer process (0: number of CPUs / peers, at least 1)"},
	}, linkFaultFlags()...)
}

func benchCluster(c *cli.Context) (bench.Cluster, error) {
	sec, err := p2p.ParseSecurity(c.String("security"))
	if err != nil {
		return bench.Cluster{}, err
	}
	muxer, err := p2p.ParseMuxer(c.String("muxer"))
	if err != nil {
		return bench.Cluster{}, err
	}
	faults, err := linkFaultsFromFlags(c)
	if err != nil {
		return bench.Cluster{}, err
	}
	intra, err := p2p.ParseIntraHost(c.String("intra-host"))
	if err != nil {
		return bench.Cluster{}, err
	}
	cl := bench.Cluster{N: c.Int("n"), Security: sec, Muxer: muxer, IntraHost: intra, InProcess: c.Bool("in-process"), GoMaxProcs: c.Int("gomaxprocs"),
		Timeout: c.Duration("collective-timeout"), LinkFaults: faults, Logger: logger(c, "bench")}
	file := c.String("tf-config")
	if file == "" {
		return cl, nil
	}
	if c.IsSet("n") || c.Bool("in-process") {
		return cl, errors.New("--tf-config runs one peer per host: leave out -n and --in-process")
	}
	spec, err := cluster.Load(file)
	if err != nil {
		return cl, err
	}
	secret, psk, identity, err := credentials(c, spec)
	if err != nil {
		return cl, err
	}
	cl.Remote = &p2p.Config{Rank: spec.Rank, Peers: spec.Peers, ClusterSecret: secret, PSK: psk, Identity: identity}
	return cl, nil
}

func init() {
	registerSub("bench", &cli.Command{
		Name:               "allreduce",
		Usage:              "time float32 sum all-reduce among N local peers, or a cluster across hosts, over libp2p (nccl-tests style)",
		CustomHelpTemplate: withExample("meshtrain bench allreduce -n 4 --sizes 64K,16M --algo ring"),
		Flags: append(benchClusterFlags(2),
			&cli.StringFlag{Name: "sizes", Value: "4K,64K,1M,16M,64M", Usage: "buffer sizes in bytes (K/M/G = KiB/MiB/GiB)"},
			&cli.StringFlag{Name: "algo", Value: "auto", Usage: "all-reduce algorithm: ring, tree (recursive doubling), star (fold at a rotating root) or auto (by size and world size)"},
			&cli.IntFlag{Name: "chunk-bytes", Usage: "ring pipelining chunk (0: default)"},
			&cli.IntFlag{Name: "small-bytes", Usage: "auto threshold: sizes up to it use tree (0: default)"},
			&cli.DurationFlag{Name: "min-time", Value: bench.DefaultMinTime, Usage: "time spent per size"},
			&cli.StringFlag{Name: "wire", Value: "fp32", Usage: "the values' format on the wire: fp32, or bf16 | fp16 (16-bit frames, every hop adding in float32, always a ring; sizes and bandwidths stay the float32 buffer's)"},
		),
		Action: func(c *cli.Context) error {
			cl, err := benchCluster(c)
			if err != nil {
				return err
			}
			sizes, err := bench.ParseSizes(c.String("sizes"))
			if err != nil {
				return err
			}
			algo, err := collective.ParseAlgo(c.String("algo"))
			if err != nil {
				return err
			}
			wire, err := half.ParseFormat(c.String("wire"))
			if err != nil {
				return fmt.Errorf("--wire: %w", err)
			}
			return bench.AllReduce(c.Context, bench.AllReduceConfig{
				Cluster: cl, Sizes: sizes, Algo: algo, ChunkBytes: c.Int("chunk-bytes"), SmallBytes: c.Int("small-bytes"),
				MinTime: c.Duration("min-time"), JSON: c.Bool("json"), Wire: wire,
			}, c.App.Writer)
		},
	})
	registerSub("bench", &cli.Command{
		Name:               "link",
		Usage:              "throughput (each direction alone, both at once) and round-trip time of every pair of peers' libp2p links",
		CustomHelpTemplate: withExample("meshtrain bench link -n 3 --bytes 256M --security noise"),
		Flags: append(benchClusterFlags(2),
			&cli.StringFlag{Name: "bytes", Value: "1G", Usage: "volume sent each way, per pair and measurement"},
			&cli.IntFlag{Name: "frame-bytes", Value: collective.DefaultChunkBytes, Usage: "payload per frame"},
			&cli.IntFlag{Name: "pings", Value: 2000, Usage: "round trips timed per pair"},
			&cli.IntFlag{Name: "ping-bytes", Value: 4096, Usage: "round-trip payload"},
		),
		Action: func(c *cli.Context) error {
			cl, err := benchCluster(c)
			if err != nil {
				return err
			}
			vol, err := bench.ParseSizes(c.String("bytes"))
			if err != nil || len(vol) != 1 {
				return cli.Exit("--bytes: want one size like 1G", 1)
			}
			return bench.Link(c.Context, bench.LinkConfig{
				Cluster: cl, Bytes: vol[0], FrameBytes: c.Int("frame-bytes"), Pings: c.Int("pings"), PingBytes: c.Int("ping-bytes"), JSON: c.Bool("json"),
			}, c.App.Writer)
		},
	})
}
