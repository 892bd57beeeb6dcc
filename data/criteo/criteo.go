package criteo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/sparse"
)

// Cardinalities are the numbers of distinct values of the 26
// categorical fields C1..C26 of the Criteo Kaggle Display Advertising
// Challenge training set (45,840,617 rows), as used for the embedding tables
// of Facebook's DLRM on that data set (its --arch-embedding-size for
// --data-set=kaggle). They sum to 33,762,577.
var Cardinalities = [26]int{
	1460, 583, 10131227, 2202608, 305, 24, 12517, 633, 3, 93145, 5683, 8351593, 3194,
	27, 14992, 5461306, 10, 5652, 2173, 4, 7046547, 18, 15, 286181, 105, 142572,
}

// Features is the one-hot width of the Criteo workload: the 26
// fields' cardinalities plus a bias feature, index 0, present in every
// example.
const Features = 33762578

// PositiveRate is the fraction of clicks in the Kaggle data.
const PositiveRate = 0.256

// Defaults of the generator's shape parameters.
const (
	// DefaultZipf is the exponent s of the per-field Zipf
	// distribution P(rank k) ∝ (1+k)^-s.
	DefaultZipf = 1.1
	// DefaultWeightStd is the spread of the ground-truth weights,
	// chosen so that the Bayes-optimal model scores about what a
	// well-trained logistic regression reaches on the real data
	// (BENCHMARKS.md, "Figures behind the code": the Criteo-like generator).
	DefaultWeightStd = 0.3
)

// calibrationExamples is how many margins the bias calibration averages
// over: enough to pin the expected positive rate to about ±0.1 point.
const calibrationExamples = 50_000

// Generator draws Criteo-like examples: one feature per field, its
// value's rank within the field Zipf-distributed and mapped to an index by a
// per-field affine permutation (so frequent values are scattered through
// the field's index range, as after a real vocabulary build); the label is
// drawn from a logistic model whose weights are a hash of (seed, feature
// index), plus a bias calibrated to PositiveRate. Everything is a
// function of the seed.
type Generator struct {
	seed      uint64
	zipf      float64
	weightStd float64
	bias      float64
	offset    [26]int32 // first index of each field
	permA     [26]uint64
	permC     [26]uint64
}

// NewGenerator returns a generator for seed; zipf (> 1) and weightStd
// (>= 0) of 0 take the defaults. Calibrating the bias draws a few hundred
// thousand examples (a fraction of a second).
func NewGenerator(seed uint64, zipf, weightStd float64) (*Generator, error) {
	if zipf == 0 {
		zipf = DefaultZipf
	}
	if weightStd == 0 {
		weightStd = DefaultWeightStd
	}
	if !(zipf > 1) || math.IsInf(zipf, 0) {
		return nil, fmt.Errorf("criteo generator: zipf exponent %v: want a number > 1", zipf)
	}
	if !(weightStd >= 0) || math.IsInf(weightStd, 0) {
		return nil, fmt.Errorf("criteo generator: weight spread %v: want a number >= 0", weightStd)
	}
	g := &Generator{seed: seed, zipf: zipf, weightStd: weightStd}
	off := int32(1)
	for f, card := range Cardinalities {
		g.offset[f] = off
		off += int32(card)
		h := criteoMix(seed ^ 0x9e3779b97f4a7c15*uint64(f+1))
		a := 1 + h%uint64(card)
		for gcd(a, uint64(card)) != 1 {
			a = 1 + (a % uint64(card))
		}
		g.permA[f], g.permC[f] = a, criteoMix(h)%uint64(card)
	}
	g.calibrate()
	return g, nil
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// criteoMix is SplitMix64's finaliser: a fast, well-mixed hash of x.
func criteoMix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Weight returns the ground-truth weight of feature i (the bias for i = 0):
// a normal deviate with spread weightStd, from a hash of (seed, i).
func (g *Generator) Weight(i int32) float64 {
	if i == 0 {
		return g.bias
	}
	h1 := criteoMix(g.seed ^ uint64(i)*0xd1b54a32d192ed03)
	h2 := criteoMix(h1)
	u1 := (float64(h1>>11) + 0.5) / (1 << 53)
	u2 := float64(h2>>11) / (1 << 53)
	return g.weightStd * math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// Bias returns the calibrated bias weight.
func (g *Generator) Bias() float64 { return g.bias }

// calibrate sets the bias so that the mean click probability over a
// calibration sample is PositiveRate (bisection on a monotone
// function).
func (g *Generator) calibrate() {
	s := g.Stream(math.MaxUint64)
	margins := make([]float64, calibrationExamples)
	var ex data.Example
	for k := range margins {
		margins[k] = s.draw(&ex)
	}
	lo, hi := -20.0, 20.0
	for range 60 {
		mid := (lo + hi) / 2
		var p float64
		for _, m := range margins {
			p += 1 / (1 + math.Exp(-(mid + m)))
		}
		if p/float64(len(margins)) < PositiveRate {
			lo = mid
		} else {
			hi = mid
		}
	}
	g.bias = (lo + hi) / 2
}

// Stream is one independent stream of examples (one per file, so
// files can be generated in parallel and still depend only on the seed).
type Stream struct {
	g     *Generator
	rng   *rand.Rand
	zipfs [26]*rand.Zipf
}

// Stream returns stream number id of g.
func (g *Generator) Stream(id uint64) *Stream {
	s := &Stream{g: g, rng: rand.New(rand.NewPCG(g.seed, criteoMix(id)))}
	for f, card := range Cardinalities {
		s.zipfs[f] = rand.NewZipf(s.rng, g.zipf, 1, uint64(card-1))
	}
	return s
}

// Next fills ex (reusing its slices) with the next example: 27 one-hot
// features (the bias and one per field, indices ascending), a -1/+1 label
// drawn from the true model, and returns the true margin, log P(y=1)/P(y=-1).
func (s *Stream) Next(ex *data.Example) float64 {
	m := s.g.bias + s.draw(ex)
	if s.rng.Float64() < 1/(1+math.Exp(-m)) {
		ex.Label = 1
	} else {
		ex.Label = -1
	}
	return m
}

// draw fills the features and returns their margin without the bias.
func (s *Stream) draw(ex *data.Example) float64 {
	g := s.g
	ex.Features = nil
	ex.Indices = append(ex.Indices[:0], 0)
	ex.Values = append(ex.Values[:0], 1)
	var m float64
	for f, card := range Cardinalities {
		rank := s.zipfs[f].Uint64()
		i := g.offset[f] + int32((g.permA[f]*rank+g.permC[f])%uint64(card))
		ex.Indices = append(ex.Indices, i)
		ex.Values = append(ex.Values, 1)
		m += g.Weight(i)
	}
	return m
}

// Config describes a generated data set.
type Config struct {
	Out      string // directory, created if missing
	Examples int    // total examples over all files
	// Files is the number of files (>= 2); the last one is the held-out
	// test set, as in the 22-file layout of the original workload.
	Files int
	// Format is "tfrecord" (sparse tf.train.Example, see DecodeTFExample) or
	// "libsvm" (1-based indices).
	Format    string
	Seed      uint64
	Zipf      float64 // 0: DefaultZipf
	WeightStd float64 // 0: DefaultWeightStd
	Workers   int     // files generated at once; 0: GOMAXPROCS
	Logger    *zap.Logger
}

// Info is what Generate records in criteo.json next to the data.
type Info struct {
	Format        string   `json:"format"`
	IndexBase     int      `json:"index_base,omitempty"` // libsvm: the first feature's index in the file
	Features      int      `json:"features"`
	Cardinalities []int    `json:"cardinalities"`
	Seed          uint64   `json:"seed"`
	Zipf          float64  `json:"zipf"`
	WeightStd     float64  `json:"weight_std"`
	Bias          float64  `json:"bias"`
	TrainFiles    []string `json:"train_files"`
	TestFiles     []string `json:"test_files"`
	TrainExamples int      `json:"train_examples"`
	TestExamples  int      `json:"test_examples"`
	TrainPositive float64  `json:"train_positive_rate"`
	TestPositive  float64  `json:"test_positive_rate"`
	// BayesOptimal is the true model scored on the test files: the best
	// accuracy and log-loss any model can expect on them.
	BayesOptimal Bayes `json:"bayes_optimal_test"`
}

// Bayes holds the Bayes-optimal figures.
type Bayes struct {
	Accuracy float64 `json:"accuracy"`
	LogLoss  float64 `json:"log_loss"`
	AUC      float64 `json:"auc"`
}

// InfoFile is the name of the JSON description in the output directory.
const InfoFile = "criteo.json"

// Generate writes cfg.Files files of Criteo-like examples into
// cfg.Out and records a Info in criteo.json. Each file is written
// with package atomicfile (a temporary name, fsync, rename), so an
// interrupted run leaves no file that looks finished.
func Generate(ctx context.Context, cfg Config) (*Info, error) {
	if cfg.Files < 2 {
		return nil, fmt.Errorf("gen-criteo: --files %d: want at least 2 (the last file is the held-out test set)", cfg.Files)
	}
	if cfg.Examples < cfg.Files {
		return nil, fmt.Errorf("gen-criteo: --examples %d for %d files: want at least one example per file", cfg.Examples, cfg.Files)
	}
	ext := map[string]string{"tfrecord": ".tfrecord", "libsvm": ".libsvm"}[cfg.Format]
	if ext == "" {
		return nil, fmt.Errorf("gen-criteo: --format %q: want tfrecord or libsvm", cfg.Format)
	}
	if cfg.Out == "" {
		return nil, errors.New("gen-criteo: --out is empty: give the output directory")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = zap.NewNop()
	}
	g, err := NewGenerator(cfg.Seed, cfg.Zipf, cfg.WeightStd)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, fmt.Errorf("gen-criteo: %w", err)
	}
	info := &Info{
		Format: cfg.Format, Features: Features, Cardinalities: Cardinalities[:],
		Seed: cfg.Seed, Zipf: g.zipf, WeightStd: g.weightStd, Bias: g.bias,
	}
	if cfg.Format == "libsvm" {
		info.IndexBase = 1
	}
	type result struct {
		examples, positives int
		eval                sparse.Evaluator
	}
	results := make([]result, cfg.Files)
	names := make([]string, cfg.Files)
	for f := range names {
		if f == cfg.Files-1 {
			names[f] = "test-00000-of-00001" + ext
			info.TestFiles = append(info.TestFiles, names[f])
		} else {
			names[f] = fmt.Sprintf("train-%05d-of-%05d%s", f, cfg.Files-1, ext)
			info.TrainFiles = append(info.TrainFiles, names[f])
		}
	}
	workers := cfg.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	log.Info("generating", zap.Int("examples", cfg.Examples), zap.Int("files", cfg.Files), zap.String("format", cfg.Format),
		zap.String("out", cfg.Out), zap.Float64("bias", g.bias), zap.Int("workers", workers))
	jobs := make(chan int)
	errs := make([]error, cfg.Files)
	var wg sync.WaitGroup
	for range min(workers, cfg.Files) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for f := range jobs {
				n := cfg.Examples / cfg.Files
				if f < cfg.Examples%cfg.Files {
					n++
				}
				res := &results[f]
				res.examples = n
				errs[f] = writeCriteoFile(ctx, g, uint64(f), filepath.Join(cfg.Out, names[f]), cfg.Format, n, f == cfg.Files-1, &res.positives, &res.eval)
				if errs[f] == nil {
					log.Debug("wrote file", zap.String("file", names[f]), zap.Int("examples", n))
				}
			}
		}()
	}
	for f := 0; f < cfg.Files && ctx.Err() == nil; f++ {
		jobs <- f
	}
	close(jobs)
	wg.Wait()
	if err := errors.Join(append(errs, ctx.Err())...); err != nil {
		return nil, fmt.Errorf("gen-criteo: %w", err)
	}
	var trainPos int
	for f, r := range results {
		if f == cfg.Files-1 {
			info.TestExamples = r.examples
			info.TestPositive = float64(r.positives) / float64(r.examples)
			m := r.eval.Metrics()
			info.BayesOptimal = Bayes{Accuracy: m.Accuracy, LogLoss: m.LogLoss, AUC: m.AUC}
			continue
		}
		info.TrainExamples += r.examples
		trainPos += r.positives
	}
	info.TrainPositive = float64(trainPos) / float64(info.TrainExamples)
	js, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteFile(filepath.Join(cfg.Out, InfoFile), append(js, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("gen-criteo: %w", err)
	}
	log.Info("generated", zap.Int("train_examples", info.TrainExamples), zap.Int("test_examples", info.TestExamples),
		zap.Float64("train_positive_rate", info.TrainPositive), zap.Float64("bayes_accuracy", info.BayesOptimal.Accuracy),
		zap.Float64("bayes_log_loss", info.BayesOptimal.LogLoss))
	return info, nil
}

// writeCriteoFile writes n examples of stream id to path; for the test file
// it also scores the true model into eval.
func writeCriteoFile(ctx context.Context, g *Generator, id uint64, path, format string, n int, test bool, positives *int, eval *sparse.Evaluator) error {
	f, err := atomicfile.Create(path, 0o644)
	if err != nil {
		return err
	}
	defer f.Abort()
	bw := bufio.NewWriterSize(f, 1<<20)
	var write func(data.Example) error
	if format == "libsvm" {
		write = data.NewLibSVMWriter(bw, false).Write
	} else {
		write = data.NewTFExampleWriter(bw).Write
	}
	s := g.Stream(id)
	var ex data.Example
	for k := 0; k < n; k++ {
		if k%65536 == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		m := s.Next(&ex)
		if ex.Label > 0 {
			*positives++
		}
		if test {
			if err := eval.Add(float32(m), ex.Label); err != nil {
				return err
			}
		}
		if err := write(ex); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Commit()
}
