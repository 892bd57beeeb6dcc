// Package calibrate is the measuring wing's calibrator: it measures the
// cost model's parameters (package collective/cost) on this machine and
// saves them for `meshtrain model predict` and `extrapolate`: α and β with
// `bench link` (one libp2p stream between two peers on 127.0.0.1), and γ
// and the fixed cost per operation from short `bench allreduce` runs, each
// run as its own `meshtrain bench` process with one process per peer:
// peers in separate processes pay the wake-ups and copies that peers on
// separate hosts pay, which peers in one process partly do not (γ in one
// process came out well below γ across the emulated hosts: BENCHMARKS.md,
// "Figures behind the code": γ in one process).
package calibrate
