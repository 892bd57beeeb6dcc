// Package plot is meshtrain's one PNG writer for its figures, and the cost
// model's charts.
//
// SavePNG is the only place a figure becomes a file: it makes the image
// canvas (vgimg, at DPI), lets the caller draw on it (a gonum *plot.Plot's
// Draw, or a composition of several) and writes the PNG, with an error that
// names the path. Every figure meshtrain writes goes through it: the report
// of `meshtrain sweep` and `meshtrain compare` (package sweep), `meshtrain
// model extrapolate --png`, a summary's resource panels and the cost
// model's validation on emulated hosts (tests/tools/hosts validate).
//
// The charts (Panel, Series, SavePanels, Extrapolation) draw the cost
// model's figures with gonum/plot: predicted curves as lines, measurements
// as points on them, on log-log axes, one panel per link rate (or one panel
// for an extrapolation).
package plot
