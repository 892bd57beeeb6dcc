// Command meshtrain is the CLI of meshtrain: peer-to-peer data-parallel
// training over libp2p. Each subcommand lives in its own file and registers
// itself with register; this file only builds the app, the logger and the
// root context (cancelled by Ctrl-C / SIGTERM; see signals.go for the
// worker's graceful SIGTERM).
package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/console"
	"github.com/meshtrain/meshtrain/mirrored"
)

// screen is the process's stdout and stderr as one terminal: what is drawn
// in place on stdout (train's progress bar, a fetch's byte count) is
// cleared before each log line on stderr and drawn again after it.
// Commands write their progress to screen.Stdout(); the log and the final
// error go to screen.Stderr().
var screen = console.New(os.Stdout, os.Stderr)

// logSink is the zap sink of the log: screen.Stderr() (see newLogger).
const logSink = "meshtrain-console"

func init() {
	err := zap.RegisterSink(logSink, func(*url.URL) (zap.Sink, error) { return stderrSink{screen.Stderr()}, nil })
	if err != nil {
		panic(err)
	}
}

// stderrSink is screen.Stderr() as a zap.Sink.
type stderrSink struct{ *console.Writer }

func (stderrSink) Close() error { return nil }

// commands is filled by register from each command file's init;
// subcommands of the groups below by registerSub.
var (
	commands    []*cli.Command
	subcommands = map[string][]*cli.Command{}
)

// groups are the parent commands whose subcommands live in several files,
// with what they are for and an example.
var groups = map[string]struct{ usage, example string }{
	"data":  {"obtain, inspect and generate data sets", "meshtrain data mnist"},
	"bench": {"measure collectives, links and training speed", "meshtrain bench allreduce -n 4 --sizes 64K,16M"},
}

func register(c *cli.Command) { commands = append(commands, c) }

// registerSub adds c under one of the groups ("data", "bench").
func registerSub(group string, c *cli.Command) {
	if _, ok := groups[group]; !ok {
		panic("meshtrain: unknown command group " + group)
	}
	subcommands[group] = append(subcommands[group], c)
}

const loggerKey = "logger"

func newApp() *cli.App {
	all := append([]*cli.Command(nil), commands...)
	for name, g := range groups {
		subs := subcommands[name]
		if len(subs) == 0 {
			continue
		}
		sort.Slice(subs, func(i, j int) bool { return subs[i].Name < subs[j].Name })
		all = append(all, &cli.Command{Name: name, Usage: g.usage, Subcommands: subs,
			CustomHelpTemplate: exampleHelp(g.example, cli.SubcommandHelpTemplate)})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	forEachCommand(all, func(c *cli.Command) { c.OnUsageError = usageErr })
	return &cli.App{
		Name:                  "meshtrain",
		Usage:                 "peer-to-peer data-parallel training over libp2p",
		CustomAppHelpTemplate: exampleHelp("meshtrain launch -n 2 --epochs 2", cli.AppHelpTemplate),
		Version:               version(),
		Flags:                 globalFlags(),
		// Typos get a suggestion (--epoch: did you mean --epochs?), and
		// errors are turned into exit codes in main, not inside cli.
		Suggest:        true,
		OnUsageError:   usageErr,
		ExitErrHandler: func(*cli.Context, error) {},
		Before: func(c *cli.Context) error {
			log, err := newLogger(c.String("log-format"), c.String("log-level"))
			if err != nil {
				return err
			}
			c.App.Metadata = map[string]any{loggerKey: log}
			// Its records carry their own source; no stack of the adapter.
			routeLibp2pLogs(log.Named("libp2p").WithOptions(zap.WithCaller(false), zap.AddStacktrace(zapcore.FatalLevel)))
			if c.String("log-format") == "json" {
				// Every line on stderr is then JSON, the last one too.
				last := log.WithOptions(zap.AddStacktrace(zapcore.FatalLevel))
				reportError = func(msg string) { last.Error(msg); _ = last.Sync() }
			}
			return nil
		},
		After: func(c *cli.Context) error {
			if log, ok := c.App.Metadata[loggerKey].(*zap.Logger); ok {
				_ = log.Sync()
			}
			return nil
		},
		Commands:             all,
		EnableBashCompletion: true,
	}
}

// globalFlags are the app's own flags; they are accepted after the
// subcommand too (see hoistGlobalFlags).
func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-format", Value: "console", Usage: "log format: console or json", EnvVars: []string{"MESHTRAIN_LOG_FORMAT"}},
		&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log level: debug, info, warn, error", EnvVars: []string{"MESHTRAIN_LOG_LEVEL"}},
	}
}

// newLogger builds the process logger; it writes to stderr so that stdout
// stays free for results (tables, JSON) that scripts parse.
func newLogger(format, level string) (*zap.Logger, error) {
	var lvl zapcore.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	var cfg zap.Config
	switch format {
	case "console":
		cfg = zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
	case "json":
		cfg = zap.NewProductionConfig()
	default:
		return nil, fmt.Errorf("--log-format %q: want console or json", format)
	}
	cfg.Level = zap.NewAtomicLevelAt(lvl)
	cfg.OutputPaths = []string{logSink + ":stderr"}
	cfg.ErrorOutputPaths = []string{logSink + ":stderr"}
	return cfg.Build()
}

// logger returns the process logger named for a component.
func logger(c *cli.Context, name string) *zap.Logger {
	if log, ok := c.App.Metadata[loggerKey].(*zap.Logger); ok {
		return log.Named(name)
	}
	return zap.NewNop()
}

// Exit codes besides 0 and 1, as shells and torchrun users expect.
const (
	exitUsage       = 2   // a bad command line: nothing was run
	exitInterrupted = 130 // 128 + SIGINT
	// exitTerminated (128 + SIGTERM) is a process's that SIGTERM ended,
	// and a worker's that stopped because it or another peer was asked
	// to stop: retryable, as Kubeflow's ExitCode restart policy reads
	// 128-255 (and a Job any non-zero code), so the job restarts and
	// resumes; 0 would end a TFJob whose chief was evicted as Succeeded.
	exitTerminated = 143
)

// exitError is an error with its own exit code.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

// reportError writes the process's last line, its error, on stderr (as
// JSON with --log-format json).
var reportError = func(msg string) { fmt.Fprintln(screen.Stderr(), msg) }

// usageError is a mistake in the command line.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usageErr turns cli's flag errors into usage errors, with a suggestion
// for a misspelt flag.
func usageErr(c *cli.Context, err error, _ bool) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		var flags []cli.Flag
		if c.Command != nil && c.Command.Name != "" {
			flags = c.Command.Flags
		} else {
			flags = c.App.Flags
		}
		if s := cli.SuggestFlag(flags, strings.TrimLeft(name, "-"), false); s != "" {
			msg = fmt.Sprintf("unknown flag %s: did you mean %s?", name, s)
		}
	}
	return usageError{errors.New(msg)}
}

// forEachCommand calls f on every command and subcommand.
func forEachCommand(cmds []*cli.Command, f func(*cli.Command)) {
	for _, c := range cmds {
		f(c)
		forEachCommand(c.Subcommands, f)
	}
}

// hoistGlobalFlags moves the app's own flags found after the subcommand
// (meshtrain train --log-format json) to before it, where cli parses
// them. Arguments after "--" stay where they are.
func hoistGlobalFlags(args []string) []string {
	names := map[string]bool{}
	for _, f := range globalFlags() {
		for _, n := range f.Names() {
			names[n] = true
		}
	}
	var global, rest []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || !names[name] || len(rest) == 0 {
			rest = append(rest, a)
			continue
		}
		global = append(global, a)
		if !hasValue && i+1 < len(args) {
			i++
			global = append(global, args[i])
		}
	}
	return append(append([]string{args[0]}, global...), rest...)
}

// version is the module version and VCS revision this binary was built
// from (debug.ReadBuildInfo), as --version prints it and summaries and
// checkpoints record it.
func version() string {
	return mirrored.Version()
}

// exitCode reports err on stderr in one line and returns the process's
// exit code: 130 after Ctrl-C, 143 after SIGTERM, 2 for a usage error, 1
// otherwise.
func exitCode(ctx context.Context, err error) int {
	if err == nil {
		return 0
	}
	var ue usageError
	var ec cli.ExitCoder
	var ee exitError
	switch {
	case errors.As(err, &ee):
		reportError("meshtrain: " + err.Error())
		return ee.code
	case context.Cause(ctx) == errTerminated:
		reportError("meshtrain: terminated")
		return exitTerminated
	case ctx.Err() != nil:
		reportError("meshtrain: interrupted")
		return exitInterrupted
	case errors.As(err, &ue):
		reportError(fmt.Sprintf("meshtrain: %v (see meshtrain --help)", err))
		return exitUsage
	case errors.Is(err, data.ErrBadData): // found when the run opens --data, before it trains
		reportError("meshtrain: " + err.Error())
		return exitUsage
	case errors.As(err, &ec) && ec.ExitCode() == 3: // cli: no such command
		reportError("meshtrain: " + strings.Replace(err.Error(), "No help topic for", "unknown command", 1))
		return exitUsage
	}
	reportError(fmt.Sprint("meshtrain: ", err))
	return 1
}

func main() {
	ctx, stop := signalContext()
	defer stop()
	err := newApp().RunContext(ctx, hoistGlobalFlags(os.Args))
	os.Exit(exitCode(ctx, err))
}
