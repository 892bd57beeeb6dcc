package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meshtrain/meshtrain/data/atomicfile"
)

// Format is the __metadata__ "format" of the checkpoints meshtrain
// writes: version 2 carries a digest (metadata "digest") over every
// tensor and every other metadata entry, verified by Decode.
const Format = "meshtrain-checkpoint/2"

// FormatV1 is the format of checkpoints written before the digest. Decode
// still reads them (with Unverified set): refusing them would strand a run
// that was checkpointed by an older meshtrain, and they carry the same
// state; what is lost is only the proof that their bytes are intact, which
// the caller reports.
const FormatV1 = "meshtrain-checkpoint/1"

// ErrDamaged is wrapped by the errors of a checkpoint file whose bytes are
// not what meshtrain wrote: unparsable, inconsistent, a digest that does
// not match, or values that are not finite. A run falls back from such a
// file to an older checkpoint; other errors (unreadable file, a newer
// format) stop it.
var ErrDamaged = errors.New("damaged")

func damaged(err error) error { return fmt.Errorf("%w: %w", ErrDamaged, err) }

// Tensor names in a checkpoint file.
const (
	paramsTensor    = "params"
	optimizerTensor = "optimizer_state"
	// digestKey is the __metadata__ entry holding the digest.
	digestKey = "digest"
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
	// Unverified is set by Decode on a FormatV1 file: it has no digest,
	// so its bytes could not be checked. Encode ignores it.
	Unverified bool
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

// Encode returns the checkpoint's file bytes, sealed with their digest. A
// state with a NaN or infinite value is refused: no run continues from it.
func (c *Checkpoint) Encode() ([]byte, error) {
	if err := c.checkFinite(); err != nil {
		return nil, fmt.Errorf("not saving a checkpoint that cannot be resumed: %w (the run diverged)", err)
	}
	tensors := map[string]Tensor{paramsTensor: F32Tensor(c.Params)}
	if len(c.OptState) > 0 {
		tensors[optimizerTensor] = F32Tensor(c.OptState)
	}
	meta := c.metadata()
	meta[digestKey] = Digest(tensors, meta)
	return EncodeSafetensors(tensors, meta)
}

// Decode parses checkpoint file bytes and verifies them: the digest of a
// Format file, and that every value is finite. Its errors wrap ErrDamaged
// except for a format newer than this meshtrain reads.
func Decode(b []byte) (*Checkpoint, error) {
	tensors, meta, err := DecodeSafetensors(b)
	if err != nil {
		return nil, damaged(err)
	}
	unverified, err := verify(tensors, meta)
	if err != nil {
		return nil, err
	}
	if !unverified {
		// The digest covers what the header means; this covers how it is
		// spelled (JSON keys match case-insensitively).
		head, _, _, err := encodeHeader(tensors, meta)
		if err != nil || !bytes.HasPrefix(b, head) {
			return nil, damaged(errors.New("the header is not byte for byte what meshtrain writes for its contents"))
		}
	}
	c, err := fromFile(tensors, meta)
	if err != nil {
		return nil, damaged(err)
	}
	if err := c.checkFinite(); err != nil {
		return nil, damaged(err)
	}
	c.Unverified = unverified
	return c, nil
}

// verify checks the file's format and digest; true means a FormatV1 file,
// which has none.
func verify(tensors map[string]Tensor, meta map[string]string) (unverified bool, err error) {
	switch f := meta["format"]; {
	case f == FormatV1:
		return true, nil
	case f == Format:
	case strings.HasPrefix(f, "meshtrain-checkpoint/") && meta[digestKey] != "" && meta[digestKey] == Digest(tensors, meta):
		// Intact (the digest covers the format too, so this is no flipped
		// bit of ours): a newer meshtrain wrote it.
		return false, fmt.Errorf("metadata format %q: written by a newer meshtrain (this one reads %q and %q): resume it with that version", f, Format, FormatV1)
	default:
		return false, damaged(fmt.Errorf("metadata format %q: want %q (a safetensors file written by meshtrain)", f, Format))
	}
	want, ok := meta[digestKey]
	if !ok {
		return false, damaged(fmt.Errorf("no %q in the metadata of a %s file", digestKey, Format))
	}
	if got := Digest(tensors, meta); got != want {
		return false, damaged(fmt.Errorf("digest mismatch: the file records %.23s… but its tensors and metadata hash to %.23s…: its bytes changed after it was written", want, got))
	}
	return false, nil
}

// fromFile builds the checkpoint from a decoded file's tensors and
// metadata, checking their shapes and values.
func fromFile(tensors map[string]Tensor, meta map[string]string) (*Checkpoint, error) {
	var err error
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

// checkFinite fails on the first NaN or infinite value, naming it.
func (c *Checkpoint) checkFinite() error {
	for _, t := range []struct {
		name string
		v    []float32
	}{{paramsTensor, c.Params}, {optimizerTensor, c.OptState}} {
		for i, x := range t.v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				return fmt.Errorf("%s[%d] is %v: a checkpoint holds finite values only", t.name, i, x)
			}
		}
	}
	return nil
}

// Digest is the SHA-256 ("sha256:" and hex) over a file's tensors (name,
// dtype, shape and bytes, in name order) and its metadata entries (in key
// order) other than the digest itself, each length-prefixed so that no two
// different files hash the same bytes.
func Digest(tensors map[string]Tensor, meta map[string]string) string {
	h := sha256.New()
	var n [8]byte
	put := func(b []byte) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	keys := slices.Sorted(maps.Keys(meta))
	for _, k := range keys {
		if k != digestKey {
			put([]byte(k))
			put([]byte(meta[k]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(tensors)) {
		t := tensors[name]
		put([]byte(name))
		put([]byte(t.DType))
		put([]byte(fmt.Sprint(t.Shape)))
		put(t.Data)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
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
	entries, err := readDir(dir)
	if err != nil {
		return nil, err
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

var tempNameRE = regexp.MustCompile(`^\.(ckpt-\d{9,}\.safetensors)\.tmp-`)

// RemoveTemps removes the temporary files that a writer killed in Write
// left in dir (see atomicfile.TempPrefix) and returns their paths. Call it
// only when no Write into dir can be running: at a run's start.
func RemoveTemps(dir string) ([]string, error) {
	entries, err := readDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		m := tempNameRE.FindStringSubmatch(e.Name())
		if m == nil || !e.Type().IsRegular() || !strings.HasPrefix(e.Name(), atomicfile.TempPrefix(m[1])) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return removed, fmt.Errorf("removing a half-written checkpoint: %w (remove it by hand)", err)
		}
		removed = append(removed, path)
	}
	return removed, nil
}

// readDir lists a checkpoint directory; a missing one is empty.
func readDir(dir string) ([]os.DirEntry, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing checkpoints: %w", err)
	}
	return entries, nil
}
