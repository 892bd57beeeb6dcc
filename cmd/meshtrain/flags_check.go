package main

import (
	"errors"
	"fmt"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/internal/writable"
	"github.com/meshtrain/meshtrain/mirrored"
)

// The categories flags are grouped by in each command's help; a command's
// own flags have none and are listed first.
const (
	catTraining = "training"
	catSparse   = "sparse-lr"
	catGossip   = "gossip"
	catCluster  = "cluster"
	catFaults   = "fault injection"
)

// inCategory puts every flag in cat and returns them.
func inCategory(cat string, flags ...cli.Flag) []cli.Flag {
	for _, f := range flags {
		category, _ := flagFields(f)
		*category = cat
	}
	return flags
}

// hide leaves f out of the help.
func hide(f cli.Flag) {
	_, hidden := flagFields(f)
	*hidden = true
}

// flagFields returns f's Category and Hidden fields, which every cli flag
// type has but no interface sets.
func flagFields(f cli.Flag) (category *string, hidden *bool) {
	switch f := f.(type) {
	case *cli.StringFlag:
		return &f.Category, &f.Hidden
	case *cli.IntFlag:
		return &f.Category, &f.Hidden
	case *cli.Int64Flag:
		return &f.Category, &f.Hidden
	case *cli.Uint64Flag:
		return &f.Category, &f.Hidden
	case *cli.Float64Flag:
		return &f.Category, &f.Hidden
	case *cli.BoolFlag:
		return &f.Category, &f.Hidden
	case *cli.DurationFlag:
		return &f.Category, &f.Hidden
	}
	panic(fmt.Sprintf("meshtrain: flag type %T not handled by flagFields", f))
}

// withExample is a command help template that starts with an example of
// the command's use, then cli's usual sections.
func withExample(example string) string { return exampleHelp(example, cli.CommandHelpTemplate) }

// exampleHelp puts example before the sections of a help template.
func exampleHelp(example, template string) string {
	return "EXAMPLE:\n   " + example + "\n\n" + template
}

// denseOnly are the training flags the sparse-lr model does not read: it
// has its own --sparse-optimizer and a constant rate, and no MNIST.
var denseOnly = []string{"optimizer", "momentum", "weight-decay", "lr-schedule", "lr-gamma", "lr-decay-epochs",
	"warmup-epochs", "min-lr", "data-dir", "train-examples", "test-examples",
	"data", "data-format", "image-size", "color-mode", "validation-split", "label-column"}

// ignoredFlags lists the flags given on c that the chosen model or
// strategy does not read, each with why: they are warned about, not
// rejected, since a script may pass one set of flags to several runs.
func ignoredFlags(c *cli.Context) []string {
	var out []string
	sparseModel := c.String("model") == mirrored.SparseModel
	hasStrategy := slices.ContainsFunc(c.Command.Flags, func(f cli.Flag) bool { return f.Names()[0] == "strategy" })
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if !c.IsSet(name) {
			continue
		}
		cat := ""
		if cf, ok := f.(cli.CategorizableFlag); ok {
			cat = cf.GetCategory()
		}
		switch {
		case name == "skip-corrupt" && c.String("data") != "":
			// image folders read it too
		case cat == catSparse && !sparseModel:
			out = append(out, fmt.Sprintf("--%s is ignored: it applies only to --model %s", name, mirrored.SparseModel))
		case sparseModel && slices.Contains(denseOnly, name):
			out = append(out, fmt.Sprintf("--%s is ignored: --model %s does not use it", name, mirrored.SparseModel))
		case cat == catGossip && hasStrategy && c.String("strategy") != mirrored.StrategyGossip:
			out = append(out, fmt.Sprintf("--%s is ignored: it applies only to --strategy %s", name, mirrored.StrategyGossip))
		}
	}
	return out
}

// warnIgnored logs ignoredFlags as warnings, before any work starts.
func warnIgnored(c *cli.Context) {
	log := logger(c, c.Command.Name)
	for _, w := range ignoredFlags(c) {
		log.Warn(w)
	}
}

// rejectFlags fails with a usage error (exit 2) if any of flags is set:
// they do not apply to this command, for the reason why.
func rejectFlags(c *cli.Context, why string, flags ...string) error {
	for _, f := range flags {
		if c.IsSet(f) {
			return usageError{fmt.Errorf("%s: --%s %s", c.Command.Name, f, why)}
		}
	}
	return nil
}

// output is an output flag: the file or the directory (created if
// missing) its path names; suffix, if set, is added to the path (a
// prefix of files, as bench sparse's --cpuprofile).
type output struct {
	name   string
	dir    bool
	suffix string
}

// runOutputs are train's, launch's, worker's and compare's output flags
// (those a command does not have read as unset).
var runOutputs = []output{{name: "summary"}, {name: "report"}, {name: "timeline"}, {name: "logdir", dir: true}, {name: "checkpoint-dir", dir: true},
	{name: "run-dir", dir: true}, {name: "out", dir: true}}

// checkOutputs checks the output flags outs (files and directories a
// command writes, runOutputs if none are given) before the command starts,
// so that a typo in a path fails at once, not after the work whose results
// it was to hold. A path that cannot be written is a usage error (exit 2:
// nothing was run) naming the flag. A default value is checked too (it is
// written as well).
func checkOutputs(c *cli.Context, outs ...output) error {
	if len(outs) == 0 {
		outs = runOutputs
	}
	var errs []error
	for _, o := range outs {
		path := c.String(o.name)
		if path == "" {
			continue
		}
		check := writable.File
		if o.dir {
			check = writable.Dir
		}
		if err := check(path + o.suffix); err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", o.name, err))
		}
	}
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}
