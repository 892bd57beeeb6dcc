package main

import (
	"context"
	"log/slog"

	"github.com/libp2p/go-libp2p/gologshim"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// routeLibp2pLogs sends go-libp2p's own log records (its slog loggers,
// gologshim; among them go.uber.org/fx's, which libp2p builds its host
// with and which reports a failed start-up such as a listen failure) to
// log, so they are in the process's format: with --log-format json, every
// stderr line is JSON, libp2p's included. Each libp2p subsystem keeps its
// own threshold (GOLOG_LOG_LEVEL, error by default) besides log's level.
// Called before libp2p logs anything (gologshim picks a logger's handler
// at its first record).
func routeLibp2pLogs(log *zap.Logger) {
	gologshim.SetDefaultHandler(&slogZap{log: log, min: gologshim.ConfigFromEnv().LevelForSystem("")})
}

// slogZap is a slog.Handler writing to a zap logger.
type slogZap struct {
	log    *zap.Logger
	min    slog.Level // the subsystem's own threshold
	group  string     // key prefix from WithGroup
	fields []zap.Field
}

func (h *slogZap) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.min && h.log.Core().Enabled(zapLevel(l))
}

func (h *slogZap) Handle(_ context.Context, r slog.Record) error {
	ce := h.log.Check(zapLevel(r.Level), r.Message)
	if ce == nil {
		return nil
	}
	fields := append([]zap.Field(nil), h.fields...)
	r.Attrs(func(a slog.Attr) bool {
		fields = append(fields, h.field(a))
		return true
	})
	ce.Write(fields...)
	return nil
}

func (h *slogZap) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.fields = append([]zap.Field(nil), h.fields...)
	for _, a := range attrs {
		if a.Key == "logger" && h.group == "" { // gologshim names the subsystem so
			c.log = h.log.Named(a.Value.String())
			c.min = gologshim.ConfigFromEnv().LevelForSystem(a.Value.String())
			continue
		}
		c.fields = append(c.fields, h.field(a))
	}
	return &c
}

func (h *slogZap) WithGroup(name string) slog.Handler {
	c := *h
	c.group = h.group + name + "."
	return &c
}

func (h *slogZap) field(a slog.Attr) zap.Field {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return zap.String(h.group+a.Key, v.String())
	case slog.KindInt64:
		return zap.Int64(h.group+a.Key, v.Int64())
	case slog.KindBool:
		return zap.Bool(h.group+a.Key, v.Bool())
	case slog.KindFloat64:
		return zap.Float64(h.group+a.Key, v.Float64())
	case slog.KindDuration:
		return zap.Duration(h.group+a.Key, v.Duration())
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			return zap.NamedError(h.group+a.Key, err)
		}
	}
	return zap.String(h.group+a.Key, v.String())
}

// zapLevel is slog level l in zap's.
func zapLevel(l slog.Level) zapcore.Level {
	switch {
	case l >= slog.LevelError:
		return zapcore.ErrorLevel
	case l >= slog.LevelWarn:
		return zapcore.WarnLevel
	case l >= slog.LevelInfo:
		return zapcore.InfoLevel
	}
	return zapcore.DebugLevel
}
