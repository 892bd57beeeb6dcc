// Package calibrate is the measuring wing's calibrator: it measures the
// cost model's parameters (package collective/cost) on this machine and
// saves them for `meshtrain model predict` and `extrapolate`: α and β with
// `bench link` (one libp2p stream between two peers on 127.0.0.1), and γ
// and the fixed cost per operation from short `bench allreduce` runs, each
// run as its own `meshtrain bench` process with one process per peer:
// peers in separate processes pay the wake-ups and copies that peers on
// separate hosts pay, which peers in one process partly do not (on this
// machine γ measured 1.8 ns/B in one process against 3 ns/B across the
// emulated hosts).
package calibrate
