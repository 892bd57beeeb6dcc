package callbacks

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// brief is a Decision in a few words: what the driver must do.
func brief(d Decision) string {
	var w []string
	if d.Snapshot {
		w = append(w, "snap")
	}
	if d.Save {
		w = append(w, "save")
	}
	if d.Scale != 1 {
		w = append(w, fmt.Sprintf("scale %g", d.Scale))
	}
	if d.Stop {
		w = append(w, "stop")
	}
	if d.Restore > 0 {
		w = append(w, fmt.Sprintf("restore %d", d.Restore))
	}
	if len(w) == 0 {
		return "-"
	}
	return strings.Join(w, " ")
}

// feed runs values (the monitored metric per epoch, NaN allowed) through
// a machine for c at a constant rate lr, stopping after a Stop as the
// driver does; it returns each epoch's brief and every line.
func feed(c Config, values []float64, lr float64) (*Machine, []string, []string) {
	m := New(c)
	var briefs, lines []string
	for i, v := range values {
		x := Metrics{Epoch: i + 1, Evaluated: true, Loss: v, Accuracy: v, LR: Rate(lr, m.Scale(), c.MinLR), Next: lr}
		d := m.Epoch(x)
		briefs = append(briefs, brief(d))
		lines = append(lines, d.Lines...)
		if d.Stop {
			break
		}
	}
	return m, briefs, lines
}

func TestMachine(t *testing.T) {
	nan := math.NaN()
	es := func(patience int, minDelta float64, restore bool) Config {
		c := Defaults()
		c.EarlyStop, c.Patience, c.MinDelta, c.RestoreBest = true, patience, minDelta, restore
		return c
	}
	acc := func(c Config) Config { c.Monitor = MonitorAccuracy; return c }
	plateau := func(factor float64, patience, cooldown int, minLR float64) Config {
		c := Defaults()
		c.ReduceLR, c.Factor, c.LRPatience, c.Cooldown, c.MinLR, c.LRMinDelta = true, factor, patience, cooldown, minLR, 0
		return c
	}
	save := Defaults()
	save.SaveBest = "best.safetensors"
	for _, tc := range []struct {
		name   string
		c      Config
		values []float64
		lr     float64
		want   []string
		line   string // one of the lines, whole
	}{
		{"patience 2 stops two epochs after the best", es(2, 0, false), []float64{1, 0.9, 0.95, 0.91, 0.8}, 0.1,
			[]string{"-", "-", "-", "stop"}, "epoch 4: test loss did not improve for 2 epochs (best 0.9 at epoch 2): stopping"},
		{"patience 0 stops at the first epoch that does not improve", es(0, 0, false), []float64{1, 1.1, 0.5}, 0.1,
			[]string{"-", "stop"}, "epoch 2: test loss did not improve for 1 epoch (best 1 at epoch 1): stopping"},
		{"never at the first epoch, even NaN with patience 0", es(0, 0, false), []float64{nan, 1, 0.5}, 0.1,
			[]string{"-", "-", "-"}, ""},
		{"min_delta: a small gain is no improvement", es(1, 0.1, false), []float64{1, 0.95, 0.5}, 0.1,
			[]string{"-", "stop"}, ""},
		{"accuracy is maximised; equal is no improvement", acc(es(2, 0, false)), []float64{0.5, 0.6, 0.6, 0.55}, 0.1,
			[]string{"-", "-", "-", "stop"}, "epoch 4: test accuracy did not improve for 2 epochs (best 60.00% at epoch 2): stopping"},
		{"restore the best at the stop", es(1, 0, true), []float64{1, 0.8, 0.9}, 0.1,
			[]string{"snap", "snap", "stop restore 2"}, "epoch 3: test loss did not improve for 1 epoch (best 0.8 at epoch 2): stopping; restoring epoch 2's parameters"},
		{"a NaN first epoch is kept to restore all the same", es(0, 0, true), []float64{nan, nan}, 0.1,
			[]string{"snap", "stop restore 1"}, ""},
		{"plateau with cooldown (Keras's counters)", plateau(0.5, 2, 1, 0), []float64{1, 1, 1, 1, 1, 1, 1}, 0.1,
			[]string{"-", "-", "scale 0.5", "scale 0.5", "scale 0.25", "scale 0.25", "scale 0.125"},
			"epoch 3: test loss did not improve for 2 epochs (best 1 at epoch 1): reducing the learning rate to 0.05 (×0.5 of the schedule's)"},
		{"plateau: an improvement resets the wait", plateau(0.1, 2, 0, 0), []float64{1, 1, 0.5, 0.5, 0.5}, 0.1,
			[]string{"-", "-", "-", "-", "scale 0.1"}, ""},
		{"plateau: no cut at or below min_lr", plateau(0.1, 1, 0, 0.01), []float64{1, 1, 1, 1}, 0.1,
			[]string{"-", "scale 0.1", "scale 0.1", "scale 0.1"},
			"epoch 2: test loss did not improve for 1 epoch (best 1 at epoch 1): reducing the learning rate to 0.01 (×0.1 of the schedule's)"},
		{"save the best only", save, []float64{1, 0.9, 0.95, 0.8, nan}, 0.1,
			[]string{"save", "save", "-", "save", "-"}, "epoch 4: test loss improved to 0.8: saving the parameters to best.safetensors"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.c.Validate(); err != nil {
				t.Fatal(err)
			}
			m, got, lines := feed(tc.c, tc.values, tc.lr)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decisions %q, want %q", got, tc.want)
			}
			if tc.line != "" && !strings.Contains(strings.Join(lines, "\n")+"\n", tc.line+"\n") {
				t.Errorf("lines %q: want %q among them", lines, tc.line)
			}
			if !reflect.DeepEqual(m.Report().Events, lines) {
				t.Errorf("report's events %q, want the lines %q", m.Report().Events, lines)
			}
			if _, err := json.Marshal(m.Report()); err != nil {
				t.Errorf("the report does not encode: %v", err)
			}
			// The same inputs give the same decisions: every replica agrees.
			m2, again, lines2 := feed(tc.c, tc.values, tc.lr)
			if !reflect.DeepEqual(again, got) || !reflect.DeepEqual(lines2, lines) || !reflect.DeepEqual(m2.Report(), m.Report()) {
				t.Errorf("a second machine decided %q, the first %q", again, got)
			}
		})
	}
}

func TestEnd(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restore bool
		values  []float64
		want    int
	}{
		{"the best epoch was earlier", true, []float64{1, 0.5, 0.7}, 2},
		{"the last epoch is the best", true, []float64{1, 0.5, 0.4}, 0},
		{"restoring is off", false, []float64{1, 0.5, 0.7}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			c.EarlyStop, c.Patience, c.RestoreBest = true, 5, tc.restore
			m, _, _ := feed(c, tc.values, 0.1)
			got, line := m.End(len(tc.values))
			if got != tc.want || (got > 0) != (line != "") {
				t.Errorf("End = %d, %q; want epoch %d", got, line, tc.want)
			}
			if m.Report().RestoredEpoch != tc.want {
				t.Errorf("report says restored epoch %d, want %d", m.Report().RestoredEpoch, tc.want)
			}
		})
	}
}

func TestNotEvaluated(t *testing.T) {
	c := Defaults()
	c.EarlyStop = true
	m := New(c)
	var lines []string
	for e := 1; e <= 3; e++ {
		d := m.Epoch(Metrics{Epoch: e, LR: 0.1})
		if d.Stop || d.Save || d.Snapshot {
			t.Fatalf("epoch %d without a test set: %s", e, brief(d))
		}
		lines = append(lines, d.Lines...)
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "no test set") {
		t.Errorf("lines %q: want one saying there is no test set", lines)
	}
}

func TestRate(t *testing.T) {
	for _, tc := range []struct{ sched, scale, minLR, want float64 }{
		{0.1, 1, 0.5, 0.1},                  // no reduction: the schedule, even below the floor
		{0.1, 0.1, 0, 0.010000000000000002}, // the schedule scaled, in float64
		{0.1, 0.01, 0.005, 0.005},           // floored
		{0.001, 0.5, 0.005, 0.001},          // the schedule already below the floor: kept
	} {
		if got := Rate(tc.sched, tc.scale, tc.minLR); got != tc.want {
			t.Errorf("Rate(%v, %v, %v) = %v, want %v", tc.sched, tc.scale, tc.minLR, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Config)
		flag string // "" : valid
	}{
		{"defaults", func(*Config) {}, ""},
		{"accuracy", func(c *Config) { c.Monitor = MonitorAccuracy }, ""},
		{"unknown monitor", func(c *Config) { c.Monitor = "val_loss" }, "--monitor"},
		{"negative patience", func(c *Config) { c.EarlyStop, c.Patience = true, -1 }, "--early-stop-patience"},
		{"negative min delta", func(c *Config) { c.EarlyStop, c.MinDelta = true, -0.1 }, "--early-stop-min-delta"},
		{"restore without early stopping", func(c *Config) { c.RestoreBest = true }, "--restore-best"},
		{"factor 1", func(c *Config) { c.ReduceLR, c.Factor = true, 1 }, "--reduce-lr-factor"},
		{"factor 0", func(c *Config) { c.ReduceLR, c.Factor = true, 0 }, "--reduce-lr-factor"},
		{"factor NaN", func(c *Config) { c.ReduceLR, c.Factor = true, math.NaN() }, "--reduce-lr-factor"},
		{"negative plateau patience", func(c *Config) { c.ReduceLR, c.LRPatience = true, -2 }, "--reduce-lr-patience"},
		{"negative cooldown", func(c *Config) { c.ReduceLR, c.Cooldown = true, -1 }, "--reduce-lr-cooldown"},
		{"infinite floor", func(c *Config) { c.ReduceLR, c.MinLR = true, math.Inf(1) }, "--reduce-lr-min-lr"},
		{"plateau settings unchecked while off", func(c *Config) { c.Factor = 5 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Defaults()
			tc.set(&c)
			err := c.Validate()
			switch {
			case tc.flag == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.flag != "" && (err == nil || !strings.Contains(err.Error(), tc.flag+" ")):
				t.Errorf("error %v: want one naming %s", err, tc.flag)
			}
		})
	}
}

func TestString(t *testing.T) {
	c := Defaults()
	if s := c.String(); s != "" {
		t.Errorf("no callback: %q, want empty (the settings stay as before)", s)
	}
	c.EarlyStop, c.Patience = true, 3
	d := c
	d.SaveBest = "elsewhere"
	e := c
	e.SaveBest = "best"
	if c.String() == d.String() || d.String() != e.String() {
		t.Errorf("%q, %q, %q: want save-best's presence stated, not its path", c.String(), d.String(), e.String())
	}
}

// TestReplayCarries: a replay takes the previous Run's kept parameters
// over only when it keeps the same epoch (an elastic generation rolled
// back past a later best keeps nothing stale).
func TestReplayCarries(t *testing.T) {
	c := Defaults()
	c.EarlyStop, c.Patience, c.RestoreBest = true, 5, true
	hist := func(losses ...float64) []Metrics {
		var out []Metrics
		for i, l := range losses {
			out = append(out, Metrics{Epoch: i + 1, Evaluated: true, Loss: l, LR: 0.1})
		}
		return out
	}
	prev := Replay(c, nil, nil)
	params := []float32{1, 2, 3}
	for _, x := range hist(1, 0.5, 0.7) {
		prev.Act(x, false, params)
		params[0]++ // epoch 2 kept {2, 2, 3}
	}
	for _, tc := range []struct {
		name    string
		history []Metrics
		want    int // the epoch End restores from the carried state
	}{
		{"the same best epoch", hist(1, 0.5, 0.7), 2},
		{"rolled back before the best", hist(1), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Replay(c, tc.history, prev)
			got := []float32{0, 0, 0}
			d := r.Act(Metrics{Epoch: len(tc.history) + 1, Evaluated: true, Loss: 0.9, LR: 0.1}, true, got)
			if d.Restore != tc.want || (tc.want == 2) != slices.Equal(got, []float32{2, 2, 3}) {
				t.Errorf("restored epoch %d into %v (lines %q), want epoch %d", d.Restore, got, d.Lines, tc.want)
			}
		})
	}
}
