package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/meshtrain/meshtrain/data/atomicfile"
)

// Format is the __metadata__ "format" of meshtrain checkpoints.
const Format = "meshtrain-checkpoint/1"

// Tensor names in a checkpoint file.
const (
	paramsTensor    = "params"
	optimizerTensor = "optimizer_state"
)

// Checkpoint is a training state that resumes a run exactly: the flat
// parameters and optimizer state, and where the run was.
//
// On disk it is a safetensors file with the tensors "params" (F32, the
// model's flat parameter vector in nn's layout) and, unless empty,
// "optimizer_state" (F32: momentum; or Adam's moments and step count), and
// __metadata__ holding the other fields as decimal strings (plus "format",
// "config" as JSON, and "saved_at"). From Python:
//
//	from safetensors.numpy import load_file
//	t = load_file("ckpt-000001875.safetensors"); t["params"].shape  # (61706,)
type Checkpoint struct {
	Model    string
	Params   []float32
	OptState []float32

	// Step is the number of optimizer steps taken (the global step).
	Step int
	// Epoch is the input pipeline's epoch (1-based) and StepInEpoch the
	// batches of it already consumed: the pipeline position. A checkpoint
	// at the end of epoch e has Epoch e+1 and StepInEpoch 0.
	Epoch, StepInEpoch int
	StepsPerEpoch      int
	// Seed is the run's seed; the shuffling RNG of every epoch is derived
	// from (Seed, epoch, rank), so Seed and Epoch are the whole RNG state.
	Seed int64
	// Fingerprint is the run's configuration fingerprint (see Fingerprint);
	// Config is its settings as JSON.
	Fingerprint string
	Config      string
	// History is the per-epoch record so far, as JSON.
	History string
	SavedAt time.Time
}

func (c *Checkpoint) metadata() map[string]string {
	return map[string]string{
		"format":          Format,
		"model":           c.Model,
		"step":            strconv.Itoa(c.Step),
		"epoch":           strconv.Itoa(c.Epoch),
		"step_in_epoch":   strconv.Itoa(c.StepInEpoch),
		"steps_per_epoch": strconv.Itoa(c.StepsPerEpoch),
		"seed":            strconv.FormatInt(c.Seed, 10),
		"fingerprint":     c.Fingerprint,
		"config":          c.Config,
		"history":         c.History,
		"saved_at":        c.SavedAt.UTC().Format(time.RFC3339Nano),
	}
}

// Encode returns the checkpoint's file bytes.
func (c *Checkpoint) Encode() ([]byte, error) {
	tensors := map[string]Tensor{paramsTensor: F32Tensor(c.Params)}
	if len(c.OptState) > 0 {
		tensors[optimizerTensor] = F32Tensor(c.OptState)
	}
	return EncodeSafetensors(tensors, c.metadata())
}

// Decode parses checkpoint file bytes.
func Decode(b []byte) (*Checkpoint, error) {
	tensors, meta, err := DecodeSafetensors(b)
	if err != nil {
		return nil, err
	}
	if meta["format"] != Format {
		return nil, fmt.Errorf("metadata format %q: want %q (a safetensors file written by meshtrain)", meta["format"], Format)
	}
	c := &Checkpoint{Model: meta["model"], Fingerprint: meta["fingerprint"], Config: meta["config"], History: meta["history"]}
	for _, name := range []string{paramsTensor, optimizerTensor} {
		t, ok := tensors[name]
		if !ok {
			if name == paramsTensor {
				return nil, errors.New(`no "params" tensor`)
			}
			continue
		}
		if len(t.Shape) != 1 {
			return nil, fmt.Errorf("tensor %q has shape %v: want a vector", name, t.Shape)
		}
		v, err := t.Float32s()
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		if name == paramsTensor {
			c.Params = v
		} else {
			c.OptState = v
		}
	}
	for name := range tensors {
		if name != paramsTensor && name != optimizerTensor {
			return nil, fmt.Errorf("unexpected tensor %q: a meshtrain checkpoint holds %q and %q", name, paramsTensor, optimizerTensor)
		}
	}
	ints := []struct {
		key string
		dst *int
	}{{"step", &c.Step}, {"epoch", &c.Epoch}, {"step_in_epoch", &c.StepInEpoch}, {"steps_per_epoch", &c.StepsPerEpoch}}
	for _, f := range ints {
		v, err := strconv.Atoi(meta[f.key])
		if err != nil || v < 0 {
			return nil, fmt.Errorf("metadata %q = %q: want an integer ≥ 0", f.key, meta[f.key])
		}
		*f.dst = v
	}
	if c.Seed, err = strconv.ParseInt(meta["seed"], 10, 64); err != nil {
		return nil, fmt.Errorf("metadata \"seed\" = %q: want an integer", meta["seed"])
	}
	if c.StepsPerEpoch > 0 && c.StepInEpoch >= c.StepsPerEpoch {
		return nil, fmt.Errorf("metadata step_in_epoch %d: want < steps_per_epoch %d", c.StepInEpoch, c.StepsPerEpoch)
	}
	if s := meta["saved_at"]; s != "" {
		if c.SavedAt, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return nil, fmt.Errorf("metadata \"saved_at\" = %q: %w", s, err)
		}
	}
	return c, nil
}

// Read reads and validates a checkpoint file; errors name it.
func Read(path string) (*Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading checkpoint: %w", err)
	}
	c, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	return c, nil
}

// FileName is the file name (in the directory given to Write) of the
// checkpoint after step steps; the zero padding makes lexical order step
// order.
func FileName(step int) string { return fmt.Sprintf("ckpt-%09d.safetensors", step) }

var fileNameRE = regexp.MustCompile(`^ckpt-(\d{9,})\.safetensors$`)

// Write writes c into dir as FileName(c.Step), atomically (package
// atomicfile: a crash leaves either the old set of files or the new one,
// never a torn file), then deletes all but the newest keep checkpoints
// (keep ≤ 0 keeps all). It returns the file's path.
func Write(dir string, c *Checkpoint, keep int) (string, error) {
	b, err := c.Encode()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("checkpoint directory: %w", err)
	}
	path := filepath.Join(dir, FileName(c.Step))
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return "", err
	}
	if keep > 0 {
		all, err := List(dir)
		if err != nil {
			return path, err
		}
		for _, old := range all[:max(0, len(all)-keep)] {
			if err := os.Remove(old); err != nil && !errors.Is(err, os.ErrNotExist) {
				return path, fmt.Errorf("removing old checkpoint: %w", err)
			}
		}
	}
	return path, nil
}

// List returns the checkpoint files in dir, oldest (fewest steps) first; a
// missing dir has none.
func List(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing checkpoints: %w", err)
	}
	type ck struct {
		step int
		path string
	}
	var cks []ck
	for _, e := range entries {
		m := fileNameRE.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() {
			continue
		}
		step, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		cks = append(cks, ck{step, filepath.Join(dir, e.Name())})
	}
	slices.SortFunc(cks, func(a, b ck) int { return a.step - b.step })
	out := make([]string, len(cks))
	for i, c := range cks {
		out[i] = c.path
	}
	return out, nil
}

// Latest returns the newest checkpoint file in dir, or "" if there is
// none.
func Latest(dir string) (string, error) {
	all, err := List(dir)
	if err != nil || len(all) == 0 {
		return "", err
	}
	return all[len(all)-1], nil
}
