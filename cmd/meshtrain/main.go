// Command meshtrain is the CLI of meshtrain: peer-to-peer data-parallel
// training over libp2p. Each subcommand lives in its own file and registers
// itself with register; this file only builds the app, the logger and the
// root context (cancelled by Ctrl-C / SIGTERM).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sort"
	"syscall"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// commands is filled by register from each command file's init;
// subcommands of the groups below by registerSub.
var (
	commands    []*cli.Command
	subcommands = map[string][]*cli.Command{}
)

// groups are the parent commands whose subcommands live in several files.
var groups = map[string]string{
	"data":  "obtain, inspect and generate data sets",
	"bench": "measure collectives, links and training speed",
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
	for name, usage := range groups {
		subs := subcommands[name]
		if len(subs) == 0 {
			continue
		}
		sort.Slice(subs, func(i, j int) bool { return subs[i].Name < subs[j].Name })
		all = append(all, &cli.Command{Name: name, Usage: usage, Subcommands: subs})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	return &cli.App{
		Name:  "meshtrain",
		Usage: "peer-to-peer data-parallel training over libp2p",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "log-format", Value: "console", Usage: "log format: console or json", EnvVars: []string{"MESHTRAIN_LOG_FORMAT"}},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "log level: debug, info, warn, error", EnvVars: []string{"MESHTRAIN_LOG_LEVEL"}},
		},
		Before: func(c *cli.Context) error {
			log, err := newLogger(c.String("log-format"), c.String("log-level"))
			if err != nil {
				return err
			}
			c.App.Metadata = map[string]any{loggerKey: log}
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
	cfg.OutputPaths = []string{"stderr"}
	cfg.ErrorOutputPaths = []string{"stderr"}
	return cfg.Build()
}

// logger returns the process logger named for a component.
func logger(c *cli.Context, name string) *zap.Logger {
	if log, ok := c.App.Metadata[loggerKey].(*zap.Logger); ok {
		return log.Named(name)
	}
	return zap.NewNop()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newApp().RunContext(ctx, os.Args); err != nil {
		fmt.Fprintln(os.Stderr, "meshtrain:", err)
		os.Exit(1)
	}
}
