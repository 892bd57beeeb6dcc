package checkpoint

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
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

	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/internal/inputfile"
)

// Format is the __metadata__ "format" of the checkpoints meshtrain
// writes: version 3 stores one tensor per layer under PyTorch's names and
// shapes (conv1.weight [6 1 5 5] …; see Layout), so that PyTorch's
// load_state_dict takes them, and the optimizer state likewise under
// "optimizer.". Like version 2 it carries a digest (metadata "digest")
// over every tensor and every other metadata entry, verified by Decode.
const Format = "meshtrain-checkpoint/3"

// FormatV2 is the format of checkpoints with a digest but one flat
// "params" vector (and one "optimizer_state"). Decode still reads them,
// verified, with an empty Layout: the vectors are in the same order as
// version 3's tensors laid end to end.
const FormatV2 = "meshtrain-checkpoint/2"

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
	// paramsTensor and optimizerTensor are the flat vectors of formats 1
	// and 2, and the names Encode gives a vector with no Layout.
	paramsTensor    = "params"
	optimizerTensor = "optimizer_state"
	// digestKey is the __metadata__ entry holding the digest.
	digestKey = "digest"
	// paramOrderKey and stateOrderKey are the __metadata__ entries (JSON
	// arrays of tensor names) that say in which order a format 3 file's
	// tensors make up Params and OptState; the file stores them by name.
	paramOrderKey = "param_order"
	stateOrderKey = "state_order"
)

// Slot is one named tensor of a flat vector: the product of Shape floats,
// row-major, following the previous slot's.
type Slot struct {
	Name  string
	Shape []int
}

// size is the number of floats in the slot, -1 for an impossible shape.
func (s Slot) size() int {
	n, err := elements(s.Shape, 4)
	if err != nil {
		return -1
	}
	return int(n)
}

// DefaultInputScale is the input scale of a checkpoint that records a
// normalisation but no "input_scale": bytes scaled to [0, 1].
const DefaultInputScale = 255

// Layout is how a checkpoint's flat vectors split into named tensors, and
// the data the model was built for.
type Layout struct {
	// Params and State name the consecutive tensors of Params and
	// OptState. Nil stores the vector as one tensor ("params",
	// "optimizer_state"); formats 1 and 2 decode with both nil.
	Params, State []Slot
	// Classes and Rows×Cols are the data set's class count and image
	// size; 0 when not recorded (formats 1 and 2: MNIST's 10 and 28×28)
	// or not images (sparse models).
	Classes, Rows, Cols int
	// Architecture is the model's definition, nn's canonical JSON of it
	// (nn.Architecture), for a model its name does not define (one read
	// from a Keras file, or any nn.Sequential a Job.NewModel built), so
	// that the model can be rebuilt from the checkpoint alone: the
	// metadata's "architecture". Empty for the built-in models and in
	// formats 1 and 2.
	Architecture string
	// InputScale, InputMean and InputStd are the normalisation the
	// model's inputs had, its data set's own (data.Normalization): each
	// stored pixel x became (x/InputScale - InputMean)/InputStd, as
	// torchvision's ToTensor (scale 255) then Normalize((mean,), (std,)).
	// In "input_scale", "input_mean" and "input_std"; InputStd 0: not
	// recorded (sparse models, formats 1 and 2). "input_scale" is
	// written only when it is not 255, so a file of a set scaled as
	// MNIST's is what it was before the scale was recorded, and a file
	// without it reads as 255.
	InputScale, InputMean, InputStd float64
	// Channels is the images' channel count when more than 1 (the
	// metadata's "channels", written only then); 0 means 1.
	Channels int
	// ClassNames names the classes when the data set did (an image
	// folder's class folders, a CSV label column's values): the
	// metadata's "class_names", a JSON array; nil otherwise.
	ClassNames []string
	// Features is how a table's columns became the model's inputs, the
	// JSON of data.Features (the metadata's "input_features"): eval
	// encodes a table's rows with it. Empty for images.
	Features string
}

// Checkpoint is a training state that resumes a run exactly: the flat
// parameters and optimizer state, and where the run was.
//
// On disk it is a safetensors file with one F32 tensor per Layout slot
// (conv1.weight … fc3.bias for LeNet-5; weight and bias for softmax
// regression; weight for sparse-lr), the optimizer state's tensors named
// "optimizer.<param>.<state>" (momentum_buffer; exp_avg, exp_avg_sq and
// optimizer.step for Adam), and __metadata__ holding the other fields as
// decimal strings (plus "format", "config" as JSON, "saved_at", the
// tensors' order, and "architecture" when the model has one). From
// Python:
//
//	from safetensors.torch import load_file
//	t = load_file("ckpt-000001875.safetensors"); t["conv1.weight"].shape  # torch.Size([6, 1, 5, 5])
type Checkpoint struct {
	Model    string
	Params   []float32
	OptState []float32
	Layout

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
	// Version is the meshtrain that wrote it (its --version), in the
	// metadata's "meshtrain_version".
	Version string
	// Unverified is set by Decode on a FormatV1 file: it has no digest,
	// so its bytes could not be checked. Encode ignores it.
	Unverified bool
}

func (c *Checkpoint) metadata() map[string]string {
	m := map[string]string{
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
	if c.Classes > 0 {
		m["classes"] = strconv.Itoa(c.Classes)
	}
	if c.Rows > 0 || c.Cols > 0 {
		m["image_size"] = fmt.Sprintf("%dx%d", c.Rows, c.Cols)
	}
	if c.Channels > 1 {
		m["channels"] = strconv.Itoa(c.Channels)
	}
	if len(c.ClassNames) > 0 {
		b, _ := json.Marshal(c.ClassNames) // strings: cannot fail
		m["class_names"] = string(b)
	}
	if c.Features != "" {
		m["input_features"] = c.Features
	}
	if c.Version != "" {
		m["meshtrain_version"] = c.Version
	}
	if c.Architecture != "" {
		m["architecture"] = c.Architecture
	}
	if c.InputStd > 0 {
		m["input_mean"] = strconv.FormatFloat(c.InputMean, 'g', -1, 64)
		m["input_std"] = strconv.FormatFloat(c.InputStd, 'g', -1, 64)
		if c.InputScale != DefaultInputScale {
			m["input_scale"] = strconv.FormatFloat(c.InputScale, 'g', -1, 64)
		}
	}
	return m
}

// slots returns the layout of a vector of n floats: given, or one tensor
// named flat (none for an empty vector).
func slots(given []Slot, flat string, n int) []Slot {
	if given != nil || n == 0 {
		return given
	}
	return []Slot{{Name: flat, Shape: []int{n}}}
}

// split adds the tensors of v's slots to tensors and returns their names
// in order, checking that the slots tile v.
func split(tensors map[string]Tensor, v []float32, ss []Slot, what string) ([]string, error) {
	names := make([]string, 0, len(ss))
	off := 0
	for _, s := range ss {
		if _, dup := tensors[s.Name]; dup || s.Name == "" {
			return nil, fmt.Errorf("%s tensor name %q is empty or used twice", what, s.Name)
		}
		n := s.size()
		if n < 0 || off+n > len(v) {
			return nil, fmt.Errorf("%s tensor %q %v runs past the %d values", what, s.Name, s.Shape, len(v))
		}
		t := F32Tensor(v[off : off+n])
		t.Shape = slices.Clone(s.Shape)
		tensors[s.Name] = t
		names = append(names, s.Name)
		off += n
	}
	if off != len(v) {
		return nil, fmt.Errorf("%s tensors cover %d of the %d values", what, off, len(v))
	}
	return names, nil
}

// Encode returns the checkpoint's file bytes, sealed with their digest. A
// state with a NaN or infinite value is refused: no run continues from it.
func (c *Checkpoint) Encode() ([]byte, error) {
	if err := c.checkFinite(); err != nil {
		return nil, fmt.Errorf("not saving a checkpoint that cannot be resumed: %w (the run diverged)", err)
	}
	tensors := map[string]Tensor{}
	meta := c.metadata()
	for _, v := range []struct {
		vals            []float32
		slots           []Slot
		flat, key, what string
	}{{c.Params, c.Layout.Params, paramsTensor, paramOrderKey, "parameter"}, {c.OptState, c.Layout.State, optimizerTensor, stateOrderKey, "optimizer state"}} {
		names, err := split(tensors, v.vals, slots(v.slots, v.flat, len(v.vals)), v.what)
		if err != nil {
			return nil, fmt.Errorf("checkpoint layout: %w", err)
		}
		order, _ := json.Marshal(names) // strings always encode
		meta[v.key] = string(order)
	}
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
		if _, ok := meta[digestKey]; ok {
			// Version 1 had no digest: a flipped bit turned /3 into /1.
			return false, damaged(fmt.Errorf("metadata format %q with a %q: version 1 files have none, so the format changed after writing", f, digestKey))
		}
		return true, nil
	case f == Format || f == FormatV2:
	case strings.HasPrefix(f, "meshtrain-checkpoint/") && meta[digestKey] != "" && meta[digestKey] == Digest(tensors, meta):
		// Intact (the digest covers the format too, so this is no flipped
		// bit of ours): a newer meshtrain wrote it.
		return false, fmt.Errorf("metadata format %q: written by a newer meshtrain (this one reads %q, %q and %q): resume it with that version", f, Format, FormatV2, FormatV1)
	default:
		return false, damaged(fmt.Errorf("metadata format %q: want %q (a safetensors file written by meshtrain)", f, Format))
	}
	want, ok := meta[digestKey]
	if !ok {
		return false, damaged(fmt.Errorf("no %q in the metadata of a %s file", digestKey, meta["format"]))
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
	if meta["format"] == Format {
		err = c.joinTensors(tensors, meta)
	} else {
		err = c.flatTensors(tensors)
	}
	if err != nil {
		return nil, err
	}
	if err := c.readMeta(meta); err != nil {
		return nil, err
	}
	return c, nil
}

// flatTensors reads a format 1 or 2 file's two vectors.
func (c *Checkpoint) flatTensors(tensors map[string]Tensor) error {
	for _, name := range []string{paramsTensor, optimizerTensor} {
		t, ok := tensors[name]
		if !ok {
			if name == paramsTensor {
				return errors.New(`no "params" tensor`)
			}
			continue
		}
		if len(t.Shape) != 1 {
			return fmt.Errorf("tensor %q has shape %v: want a vector", name, t.Shape)
		}
		v, err := t.Float32s()
		if err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		if name == paramsTensor {
			c.Params = v
		} else {
			c.OptState = v
		}
	}
	for name := range tensors {
		if name != paramsTensor && name != optimizerTensor {
			return fmt.Errorf("unexpected tensor %q: a %s checkpoint holds %q and %q", name, FormatV2, paramsTensor, optimizerTensor)
		}
	}
	return nil
}

// joinTensors reads a format 3 file's tensors into Params and OptState
// in the order its metadata gives, and their names and shapes into
// Layout. Every tensor must be listed exactly once.
func (c *Checkpoint) joinTensors(tensors map[string]Tensor, meta map[string]string) error {
	seen := map[string]bool{}
	for _, v := range []struct {
		key   string
		vals  *[]float32
		slots *[]Slot
	}{{paramOrderKey, &c.Params, &c.Layout.Params}, {stateOrderKey, &c.OptState, &c.Layout.State}} {
		var names []string
		if err := json.Unmarshal([]byte(meta[v.key]), &names); err != nil {
			return fmt.Errorf("metadata %q = %q: want a JSON array of tensor names", v.key, meta[v.key])
		}
		for _, name := range names {
			t, ok := tensors[name]
			if !ok || seen[name] {
				return fmt.Errorf("metadata %q lists tensor %q, which is missing or listed twice", v.key, name)
			}
			seen[name] = true
			f, err := t.Float32s()
			if err != nil {
				return fmt.Errorf("tensor %q: %w", name, err)
			}
			*v.vals = append(*v.vals, f...)
			*v.slots = append(*v.slots, Slot{Name: name, Shape: t.Shape})
		}
	}
	if len(c.Params) == 0 {
		return fmt.Errorf("metadata %q names no parameter tensor", paramOrderKey)
	}
	for name := range tensors {
		if !seen[name] {
			return fmt.Errorf("unexpected tensor %q: not in %q or %q", name, paramOrderKey, stateOrderKey)
		}
	}
	return nil
}

// readMeta reads the position, seed, time and data shape from meta.
func (c *Checkpoint) readMeta(meta map[string]string) error {
	var err error
	ints := []struct {
		key string
		dst *int
	}{{"step", &c.Step}, {"epoch", &c.Epoch}, {"step_in_epoch", &c.StepInEpoch}, {"steps_per_epoch", &c.StepsPerEpoch}}
	for _, f := range ints {
		v, err := strconv.Atoi(meta[f.key])
		if err != nil || v < 0 {
			return fmt.Errorf("metadata %q = %q: want an integer ≥ 0", f.key, meta[f.key])
		}
		*f.dst = v
	}
	if c.Seed, err = strconv.ParseInt(meta["seed"], 10, 64); err != nil {
		return fmt.Errorf("metadata \"seed\" = %q: want an integer", meta["seed"])
	}
	if c.StepsPerEpoch > 0 && c.StepInEpoch >= c.StepsPerEpoch {
		return fmt.Errorf("metadata step_in_epoch %d: want < steps_per_epoch %d", c.StepInEpoch, c.StepsPerEpoch)
	}
	if s := meta["saved_at"]; s != "" {
		if c.SavedAt, err = time.Parse(time.RFC3339Nano, s); err != nil {
			return fmt.Errorf("metadata \"saved_at\" = %q: %w", s, err)
		}
	}
	if s, ok := meta["classes"]; ok {
		if c.Classes, err = strconv.Atoi(s); err != nil || c.Classes < 1 {
			return fmt.Errorf("metadata \"classes\" = %q: want an integer ≥ 1", s)
		}
	}
	if s, ok := meta["image_size"]; ok {
		if _, err := fmt.Sscanf(s, "%dx%d", &c.Rows, &c.Cols); err != nil || c.Rows < 1 || c.Cols < 1 || s != fmt.Sprintf("%dx%d", c.Rows, c.Cols) {
			return fmt.Errorf("metadata \"image_size\" = %q: want ROWSxCOLS", s)
		}
	}
	if s, ok := meta["channels"]; ok {
		if c.Channels, err = strconv.Atoi(s); err != nil || c.Channels < 2 {
			return fmt.Errorf("metadata \"channels\" = %q: want an integer ≥ 2 (absent for 1)", s)
		}
	}
	if s, ok := meta["class_names"]; ok {
		if err := json.Unmarshal([]byte(s), &c.ClassNames); err != nil || (c.Classes > 0 && len(c.ClassNames) != c.Classes) {
			return fmt.Errorf("metadata \"class_names\" = %q: want a JSON array of %d strings", clipMeta(s), c.Classes)
		}
	}
	c.Features = meta["input_features"]
	c.Version = meta["meshtrain_version"]
	c.Architecture = meta["architecture"]
	if s, ok := meta["input_std"]; ok {
		if c.InputStd, err = strconv.ParseFloat(s, 64); err != nil || !(c.InputStd > 0) {
			return fmt.Errorf("metadata \"input_std\" = %q: want a number > 0", s)
		}
		if c.InputMean, err = strconv.ParseFloat(meta["input_mean"], 64); err != nil {
			return fmt.Errorf("metadata \"input_mean\" = %q: want a number", meta["input_mean"])
		}
		c.InputScale = DefaultInputScale
		if s, ok := meta["input_scale"]; ok {
			if c.InputScale, err = strconv.ParseFloat(s, 64); err != nil || !(c.InputScale > 0) {
				return fmt.Errorf("metadata \"input_scale\" = %q: want a number > 0", s)
			}
		}
	}
	return nil
}

// checkFinite fails on the first NaN or infinite value, naming its tensor
// and its index in the tensor's flat order.
func (c *Checkpoint) checkFinite() error {
	for _, t := range []struct {
		v  []float32
		ss []Slot
	}{{c.Params, slots(c.Layout.Params, paramsTensor, len(c.Params))}, {c.OptState, slots(c.Layout.State, optimizerTensor, len(c.OptState))}} {
		for i, x := range t.v {
			if !math.IsNaN(float64(x)) && !math.IsInf(float64(x), 0) {
				continue
			}
			name, at := "", i
			for _, s := range t.ss {
				if name = s.Name; at < s.size() {
					break
				}
				at -= s.size()
			}
			return fmt.Errorf("%s[%d] is %v: a checkpoint holds finite values only", name, at, x)
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
	b, err := inputfile.ReadFile(path) // a FIFO is refused, not waited on
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

// clipMeta shortens a metadata value for an error message.
func clipMeta(s string) string {
	if len(s) > 120 {
		return s[:120] + "..."
	}
	return s
}
