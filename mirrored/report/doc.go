// Package report is a run's report, the one both wings write it through:
// the running wing (mirrored/launch, meshtrain train and worker) at the end
// of every run, the measuring wing (mirrored/measure/...) for each point of
// a sweep or a comparison. Keeping it here, below both, is what lets the
// running wing stop importing the measuring wing.
//
// What it holds:
//
//   - the summary (summary.go, report.go): a finished launch's Report, the
//     table WriteTable prints (one row per peer, bytes per link, the
//     membership changes, whether the replicas ended identical) and the
//     --summary JSON WriteSummary writes beside the resources plot;
//   - the verdict (verdict.go): what bounds a run's step, named from the
//     figures every run already records (below);
//   - the figures (png.go, chart.go, plotresources.go): SavePNG is the
//     only place a figure becomes a file (the report of `meshtrain sweep`
//     and `meshtrain compare`, `meshtrain model extrapolate --png`, a
//     summary's resource panels (PlotResources) and the cost model's
//     validation on emulated hosts); the charts (Panel, Series,
//     SavePanels, Extrapolation) draw the cost model's figures with
//     gonum/plot: predicted curves as lines, measurements as points on
//     them, on log-log axes.
//
// The verdict names the one resource a user should look at first, with
// the figures that show it and the next thing to try. It reads each
// peer's mirrored.PeerStats (the split of step time into computing,
// communicating, waiting for the input and waiting for slower peers, the
// bytes per link, the CPU time) and what the caller knows of the machine
// (cores, peers per host, a measured link rate, the cost model's
// prediction). It measures nothing itself and has no state: the same
// figures give the same verdict.
//
// The rules, in order; the first that holds is the verdict (Rules lists
// their thresholds):
//
//  1. input pipeline: the peers wait for their next batch for at least
//     InputShare of the step;
//  2. peers sharing CPU cores: more peers on one host than it has cores,
//     and the host's cores were at least BusyShare busy with them or the
//     peers computed at least ComputeShare of their step (the machine's
//     other work takes cores too; before the
//     straggler rule: peers that share cores compute unevenly, and the
//     sharing is the cause);
//  3. straggler: one rank computes at least StragglerRatio× as long per
//     step as the median of the others, and the others wait for it (or
//     spend it in the exchange, where a ring waits) for at least
//     StragglerWait of their step, and its extra computing is at least
//     StragglerWait of the median step;
//  4. other processes on the host: processes other than the peers kept at
//     least OthersShare of a host's cores busy while the peers ran (the
//     machine's busy CPU time from /proc/stat over the peers' lives, less
//     the peers' own CPU time, each process counted once), and the peers
//     computed at least ComputeShare of their step: the batch or the
//     peers per host are not what to change. Beside any other verdict
//     that load is said too;
//  5. when communicating takes at least CommShare of the step:
//     the cipher's CPU (an encrypted link, and the CPU at least BusyShare
//     busy: the cores, not the wire, set the pace); network latency (each
//     step sends less than SmallStep bytes per peer: many small messages,
//     where the per-message cost dominates); otherwise network bandwidth
//     (with the rate each link carried, against the measured link rate
//     when known);
//  6. compute: otherwise, and the advice fits the host: more peers while
//     a core has none, more hosts once each core has one.
package report
