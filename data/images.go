package data

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
)

// ImageSet is an image classification data set as every reader returns
// it (OpenImages): training and test images of one shape H×W×C, its class
// count, and, in each Images, how its pixels become a model's inputs.
// Invariants kept by the readers: Train and Test have the same Rows, Cols,
// channels, storage (bytes or floats) and Norm; every label is below
// Classes; Classes ≥ 2.
type ImageSet struct {
	Train, Test *Images
	// Dir is where the set was read from: the directory of MNIST's IDX
	// files or of the .npy files, or the .npz file; "" when built by hand.
	Dir string
	// Classes is the number of classes: 1 + the largest label of either
	// set (10 for the published MNIST). 0 in a hand-built set means
	// "count them" (see NumClasses).
	Classes int
	// Format names the reader that read it (FormatMNIST, FormatNPZ,
	// FormatNPY, FormatImages, FormatCSV); "" when built by hand.
	Format string
	// ClassNames, when the data set names its classes (an image folder's
	// class folders, sorted; a CSV label column's values, sorted), holds
	// one name per class id; nil for sets labelled by number only.
	ClassNames []string
	// Features describes a table's columns (FormatCSV): how each raw
	// field became model inputs (standardised with the training split's
	// mean and deviation, or one-hot). Nil for images.
	Features *Features
}

// MNIST is the name ImageSet had when MNIST was the only image set; it
// stays so that code holding a *data.MNIST (a Job's data set, the tests'
// synthetic sets) keeps compiling while it moves to ImageSet.
type MNIST = ImageSet

// NumClasses is m.Classes, or if that is 0, 1 + the largest label of
// either set.
func (m *ImageSet) NumClasses() int {
	if m.Classes > 0 {
		return m.Classes
	}
	top := 0
	for _, im := range []*Images{m.Train, m.Test} {
		if im != nil {
			for _, l := range im.Labels {
				top = max(top, int(l))
			}
		}
	}
	return top + 1
}

// Images is a set of N images of Rows×Cols pixels of Channels channels
// (channel-last, as Keras and NumPy store them) with class labels. The
// pixels are bytes (Pixels, N*Rows*Cols*C of them, image-major then
// row-major then channel) or, for a set stored as floats, Floats in the
// same order; the other is nil. Labels holds N class ids.
type Images struct {
	N, Rows, Cols int
	// Channels is C; 0 means 1 (greyscale), as in every set built before
	// images had channels.
	Channels int
	Pixels   []uint8
	Floats   []float32
	Labels   []uint8
	// Norm is how Dataset turns a stored pixel into a model input; the
	// zero value is MNIST's recipe (MNISTNorm), which every IDX set and
	// every set built by hand before Norm existed was trained with.
	Norm Normalization
	// Shard, when World > 1, says that only this peer's examples are held
	// (the rows i with i mod World = Rank, which NewPipeline's data
	// sharding gives rank Rank; row i at i/World of Pixels or Floats): a
	// reader that loads a shard (ImageOptions.Shard) sets it. Labels are
	// held for every example (one byte each), so that classes are
	// counted and checked over the whole set.
	Shard Shard
	// Digest, when set, is what WriteDigest writes instead of the pixels:
	// a sharded set's peers hold different pixels, so the reader records
	// what identifies the whole file (its members' sizes and CRC-32s, or
	// a hash of its bytes) for the peers to compare.
	Digest string
}

// Shard is one peer's part of a data set: rank Rank of World.
type Shard struct{ Rank, World int }

// Holds says whether example i is in s (every example when World ≤ 1).
func (s Shard) Holds(i int) bool { return s.World <= 1 || i%s.World == s.Rank }

// slot is where example i sits in a sharded array.
func (s Shard) slot(i int) int {
	if s.World <= 1 {
		return i
	}
	return i / s.World
}

// C is the channel count: Channels, or 1 when that is 0.
func (im *Images) C() int { return max(1, im.Channels) }

// Dim is the number of values in one image, Rows*Cols*C: a dense
// model's input width.
func (im *Images) Dim() int { return im.Rows * im.Cols * im.C() }

// Head returns the first n images of im (all of im if n is 0 or not
// below N), sharing its memory.
func (im *Images) Head(n int) *Images {
	if n <= 0 || n >= im.N {
		return im
	}
	out := *im
	d := im.Dim()
	out.N, out.Labels = n, im.Labels[:n]
	held := n
	if im.Shard.World > 1 {
		held = ShardSize(n, im.Shard.World, im.Shard.Rank)
		out.Digest = fmt.Sprintf("%s head %d", im.Digest, n)
	}
	if im.Floats != nil {
		out.Floats = im.Floats[:held*d]
	} else {
		out.Pixels = im.Pixels[:held*d]
	}
	return &out
}

// WriteDigest writes what identifies the images (shape, pixels, labels,
// normalisation) to w, for a digest that catches peers holding different
// data. A greyscale byte set normalised as MNIST writes exactly what the
// digest hashed before images had channels, so MNIST's digest, and the
// runs that record it, stay the same.
func (im *Images) WriteDigest(w io.Writer) {
	fmt.Fprintf(w, "%d×%d×%d\n", im.N, im.Rows, im.Cols)
	if im.Digest != "" {
		fmt.Fprintf(w, "file %s\n", im.Digest)
		w.Write(im.Labels)
		fmt.Fprintf(w, "channels %d floats %t norm %s\n", im.C(), im.Floats != nil, im.Norm.Resolve())
		return
	}
	w.Write(im.Pixels)
	if im.Floats != nil {
		var b [4]byte
		for _, v := range im.Floats {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			w.Write(b[:])
		}
	}
	w.Write(im.Labels)
	if im.C() != 1 || im.Floats != nil || im.Norm.Resolve() != MNISTNorm {
		fmt.Fprintf(w, "channels %d floats %t norm %s\n", im.C(), im.Floats != nil, im.Norm.Resolve())
	}
}

// Normalization maps a stored pixel value v to a model input,
// (v/Scale - Mean)/Std: torchvision's ToTensor (Scale 255) then
// Normalize((Mean,), (Std,)). The zero value means MNISTNorm (see
// Resolve).
type Normalization struct {
	Scale, Mean, Std float64
}

// MNISTMean and MNISTStd normalise pixels as (x/255 - MNISTMean)/MNISTStd,
// the same constants as the PyTorch anchors.
const (
	MNISTMean = 0.1307
	MNISTStd  = 0.3081
)

var (
	// MNISTNorm is MNIST's recipe, (x/255 - 0.1307)/0.3081, which the
	// built-in models were tuned with: every IDX set is read with it.
	MNISTNorm = Normalization{Scale: 255, Mean: MNISTMean, Std: MNISTStd}
	// UnitNorm scales bytes to [0, 1] (x/255), Keras's usual recipe: a
	// byte image set other than MNIST's IDX files is read with it.
	UnitNorm = Normalization{Scale: 255, Std: 1}
	// NoNorm leaves values as stored: a float image set is read with it,
	// as its values are taken to be already what the model should see.
	NoNorm = Normalization{Scale: 1, Std: 1}
)

// Resolve returns n, or MNISTNorm for the zero Normalization.
func (n Normalization) Resolve() Normalization {
	if n == (Normalization{}) {
		return MNISTNorm
	}
	return n
}

// Check says whether n (resolved) can be applied: a positive, finite
// Scale and Std and a finite Mean.
func (n Normalization) Check() error {
	r := n.Resolve()
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	if !(r.Scale > 0) || !(r.Std > 0) || !finite(r.Scale) || !finite(r.Std) || !finite(r.Mean) {
		return fmt.Errorf("normalisation %s: want a finite scale and std above 0 and a finite mean", r)
	}
	return nil
}

// String writes n as the formula it applies: "(x/255 - 0.1307)/0.3081",
// "x/255", "x".
func (n Normalization) String() string {
	r := n.Resolve()
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	s := "x"
	if r.Scale != 1 {
		s += "/" + f(r.Scale)
	}
	if r.Mean != 0 {
		s = "(" + s + " - " + f(r.Mean) + ")"
	}
	if r.Std != 1 {
		s += "/" + f(r.Std)
	}
	return s
}

// apply is the normalised value of v.
func (n Normalization) apply(v float64) float32 {
	return float32((v/n.Scale - n.Mean) / n.Std)
}

// Dataset returns the images as a dense Dataset of Dim() features, each
// pixel normalised by im.Norm, with the class id as label. It shares the
// pixel memory; byte pixels are normalised as rows are copied into a
// batch, through a 256-entry table (cheaper than holding a float32 copy
// of the set: 188 MB for MNIST's training images).
//
// Images of more than one channel are stored channel-last (H×W×C, as
// NumPy, Keras and image files hold them) but nn's layers take an
// example planar (C×H×W, as PyTorch does): the row is transposed as it is
// copied into the batch, in the same pass that normalises it, so the
// conversion costs no second copy and the stored set stays as read. A
// greyscale image is the same in both layouts.
func (im *Images) Dataset() Dataset {
	s := &imageSet{im: im, dim: im.Dim(), norm: im.Norm.Resolve()}
	for p := range s.lut {
		s.lut[p] = s.norm.apply(float64(p))
	}
	return s
}

type imageSet struct {
	im   *Images
	dim  int
	norm Normalization
	lut  [256]float32
}

func (s *imageSet) Len() int { return s.im.N }
func (s *imageSet) Dim() int { return s.dim }

func (s *imageSet) Append(b *Batch, i int) {
	n := len(b.X)
	b.X = slices.Grow(b.X, s.dim)[:n+s.dim]
	row := b.X[n : n+s.dim]
	k := s.im.Shard.slot(i)
	if c := s.im.C(); c > 1 {
		s.appendPlanar(row, k, c)
	} else if s.im.Floats != nil {
		src := s.im.Floats[k*s.dim : k*s.dim+s.dim]
		if s.norm == NoNorm {
			copy(row, src)
		} else {
			for j, v := range src {
				row[j] = s.norm.apply(float64(v))
			}
		}
	} else {
		lookup(row, s.im.Pixels[k*s.dim:k*s.dim+s.dim], &s.lut)
	}
	b.Labels = append(b.Labels, float32(s.im.Labels[i]))
	b.Size++
}

// appendPlanar writes held image k, of c channels stored channel-last,
// into row planar (channel c's plane at c*H*W), normalised.
func (s *imageSet) appendPlanar(row []float32, k, c int) {
	plane := s.dim / c
	if s.im.Floats != nil {
		src := s.im.Floats[k*s.dim : k*s.dim+s.dim]
		for p := range plane {
			for ch := range c {
				row[ch*plane+p] = s.norm.apply(float64(src[p*c+ch]))
			}
		}
		return
	}
	src := s.im.Pixels[k*s.dim : k*s.dim+s.dim]
	for p := range plane {
		for ch := range c {
			row[ch*plane+p] = s.lut[src[p*c+ch]]
		}
	}
}

// InputNorm is the one normalisation rule (see the package doc): the
// reader's (im.Norm: MNIST's recipe for IDX sets, x/255 for other byte
// images, as stored for float arrays, tables and token ids), unless the
// model normalises its inputs itself (its first layer is a Rescaling or
// a Normalization, as Keras's examples build them), when it gets the
// values as stored. A table's columns are standardised by the reader
// (Features) either way.
func InputNorm(im *Images, modelNormalizes bool) Normalization {
	if modelNormalizes {
		return NoNorm
	}
	return im.Norm.Resolve()
}
