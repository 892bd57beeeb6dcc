package nn

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
)

// Dropout zeroes each input of a training pass with probability Rate (in
// [0, 1)) and scales the others by 1/(1−Rate); evaluation passes it
// through. Its masks depend only on the model's seed, the layer and where
// the pass is in a run (see Sequential.SetStep).
type Dropout struct{ Rate float64 }

func (Dropout) kind() string { return "dropout" }

// dropoutJSON is Dropout's JSON.
type dropoutJSON struct {
	Type string  `json:"type"`
	Rate float64 `json:"rate"`
}

func init() {
	register("dropout", func(raw json.RawMessage) (LayerSpec, error) {
		return decodeAs(raw, func(j dropoutJSON) (LayerSpec, error) { return Dropout{Rate: j.Rate}, nil })
	})
}

func (d Dropout) encode() (any, error) { return dropoutJSON{Type: d.kind(), Rate: d.Rate}, nil }

func (d Dropout) build(in Shape) (layer, Shape, error) {
	if !(d.Rate >= 0 && d.Rate < 1) {
		return nil, Shape{}, fmt.Errorf("rate %v: want one in [0, 1)", d.Rate)
	}
	return newDropout(in.Size(), d.Rate), in, nil
}

// dropout zeroes each input of a training pass with probability Rate and
// scales the others by 1/(1−Rate) (inverted dropout, as Keras and PyTorch
// do), so evaluation passes, which it leaves alone, need no scaling.
//
// The mask is a hash, not a stream: whether input i of example e is kept
// depends only on key and (first+e)·Size+i, where key stands for (seed,
// layer, replica, epoch, step) and first is the index in the whole batch
// of the shard's first example. So the mask of a step is the same however
// the batch is split into shards, on whichever replica count computes it
// again, and a resumed run draws the masks of an uninterrupted one.
type dropout struct {
	Size int
	Rate float64

	key   uint64
	first int
	train bool
	mask  []float32 // n × Size: 0 or 1/(1−Rate), from the last training Forward

	// A batch in chunks (see chunker): examples cFirst … of cBatch, whose
	// masks mask holds.
	cFirst, cBatch int
}

func (l *dropout) chunk(first, batch int) { l.cFirst, l.cBatch = first, batch }
func (l *dropout) reads() (x, y bool)     { return false, false }

// masks returns the masks of a pass over n examples.
func (l *dropout) masks(n int) []float32 {
	first, batch := l.cFirst, l.cBatch
	if batch == 0 {
		first, batch = 0, n
	}
	if cap(l.mask) < batch*l.Size {
		l.mask = make([]float32, batch*l.Size)
	}
	l.mask = l.mask[:batch*l.Size]
	return l.mask[first*l.Size : (first+n)*l.Size]
}

func newDropout(size int, rate float64) *dropout { return &dropout{Size: size, Rate: rate} }

func (l *dropout) InSize() int         { return l.Size }
func (l *dropout) OutSize() int        { return l.Size }
func (l *dropout) NumParams() int      { return 0 }
func (l *dropout) Bind(_, _ []float32) {}
func (l *dropout) Init(_ *rand.Rand)   {}
func (l *dropout) setTrain(on bool)    { l.train = on }

// setStep sets the key of the next training passes and the batch index of
// this layer's first example.
func (l *dropout) setStep(key uint64, first int) { l.key, l.first = key, first }

// mix is SplitMix64's finaliser: a bijection of 64-bit words whose output
// bits each depend on every input bit.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// dropoutKey folds a run's seed, a layer's index and the replica, epoch
// and step of a training pass into one key.
func dropoutKey(seed int64, layer, rank, epoch, step int) uint64 {
	k := mix(uint64(seed) ^ 0x64726f706f7574) // "dropout"
	for _, v := range [...]int{layer, rank, epoch, step} {
		k = mix(k + uint64(v) + 0x9e3779b97f4a7c15)
	}
	return k
}

func (l *dropout) Forward(y, x []float32, n int) {
	x, y = x[:n*l.Size], y[:n*l.Size]
	if !l.train || l.Rate == 0 {
		copy(y, x)
		return
	}
	mask := l.masks(n)
	// Input j is kept when the top 24 bits of its hash are at least
	// Rate·2²⁴.
	cut := int64(math.Round(l.Rate * (1 << 24)))
	scale := math.Float32bits(float32(1 / (1 - l.Rate)))
	base := uint64((l.first + l.cFirst) * l.Size)
	for j, v := range x {
		// drop is all ones when the hash's top bits are below cut: a
		// mask, not a branch, which a random draw would mispredict.
		drop := uint32((int64(mix(l.key+(base+uint64(j))*0x9e3779b97f4a7c15)>>40) - cut) >> 63)
		m := math.Float32frombits(scale &^ drop)
		mask[j] = m
		y[j] = v * m
	}
}

func (l *dropout) Backward(dx, dy, _, _ []float32, n int) {
	if dx == nil {
		return
	}
	dx, dy = dx[:n*l.Size], dy[:n*l.Size]
	if !l.train || l.Rate == 0 {
		copy(dx, dy)
		return
	}
	for j, m := range l.masks(n) {
		dx[j] = dy[j] * m
	}
}
