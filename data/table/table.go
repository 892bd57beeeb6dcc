// Package table reads CSV tables, data.FormatCSV: a header row, a label
// column, numeric columns standardised and string columns one-hot as a
// Keras preprocessing stack adapted to the training split would (see
// data.Features). It registers with data's opener when imported.
package table

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/meshtrain/meshtrain/data"
	"github.com/meshtrain/meshtrain/internal/inputfile"
)

const (
	// maxCSVBytes bounds a CSV table: it is read into memory whole (its
	// columns' statistics come from the training rows before any row is
	// encoded).
	maxCSVBytes = 1 << 30
	// maxCategories bounds a string column's distinct training values:
	// past it a one-hot encoding is wider than it is useful (an id or
	// free text), and the column is refused by name.
	maxCategories = 1000
)

func init() {
	data.RegisterFormat(data.FormatCSV, "a CSV table with a header row (.csv)",
		func(path string, isDir bool, _ []byte) bool {
			return !isDir && strings.EqualFold(filepath.Ext(path), ".csv")
		},
		func(_ context.Context, path string, opts data.ImageOptions) (*data.ImageSet, error) {
			return Read(path, opts.Read)
		})
}

// Read reads a table (data.FormatCSV): a header row naming the columns,
// then one row per example, every row with the header's number of
// fields. The label column (ro.LabelColumn, else the last) holds class
// ids 0..255 or class names (the classes are then its distinct values,
// sorted; data.ImageSet.ClassNames). The test split is held out by
// ro.ValidationSplit (required), by a hash of each row's line number;
// the other columns are encoded as data.Features says, from the training
// rows, or as ro.Features says when given (eval, from a checkpoint). The
// result is an ImageSet of 1×width float rows, used as stored (data.NoNorm).
func Read(path string, ro data.ReadOptions) (*data.ImageSet, error) {
	b, err := inputfile.ReadFileMax(path, maxCSVBytes)
	if err != nil {
		return nil, fmt.Errorf("CSV table: %w", err)
	}
	return parseCSV(path, b, ro)
}

// parseCSV is Read of the table b, named path in errors.
func parseCSV(path string, b []byte, ro data.ReadOptions) (*data.ImageSet, error) {
	r := csv.NewReader(strings.NewReader(string(b)))
	r.ReuseRecord = false
	header, err := r.Read()
	if err == io.EOF {
		return nil, fmt.Errorf("%s is empty: want a header row naming the columns, then one row per example", path)
	}
	if err != nil {
		return nil, csvError(path, err, 0)
	}
	r.FieldsPerRecord = len(header)
	for i, h := range header {
		if h = strings.TrimSpace(h); h == "" || slices.Contains(header[:i], h) {
			return nil, fmt.Errorf("%s: line 1: column %d's name %q is empty or repeated: the header row must name every column once", path, i+1, h)
		}
		header[i] = h
	}
	if len(header) < 2 {
		return nil, fmt.Errorf("%s: line 1: %d column(s): want features and a label column", path, len(header))
	}
	label := len(header) - 1
	if ro.LabelColumn != "" {
		if label = slices.Index(header, ro.LabelColumn); label < 0 {
			return nil, fmt.Errorf("%s has no column %q: its columns are %s; give --label-column one of them", path, ro.LabelColumn, strings.Join(header, ", "))
		}
	}
	var rows [][]string
	var lines []int
	for {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(path, err, len(header))
		}
		line, _ := r.FieldPos(0)
		for j, v := range rec {
			if rec[j] = strings.TrimSpace(v); rec[j] == "" {
				return nil, fmt.Errorf("%s: line %d, column %s: missing value: fill it in or drop the row", path, line, header[j])
			}
		}
		rows, lines = append(rows, rec), append(lines, line)
	}
	ids, names, err := csvLabels(path, header[label], label, rows, lines)
	if err != nil {
		return nil, err
	}
	if ro.ValidationSplit <= 0 {
		return nil, fmt.Errorf("%s: a CSV table has no test split of its own: give --validation-split F (e.g. 0.2) to hold out that fraction of its rows", path)
	}
	var train, test []int
	for i, line := range lines {
		if data.HeldOut("line "+strconv.Itoa(line), ro.SplitSeed, ro.ValidationSplit) {
			test = append(test, i)
		} else {
			train = append(train, i)
		}
	}
	if len(train) == 0 || len(test) == 0 {
		return nil, fmt.Errorf("%s: --validation-split %v of %d rows leaves %d training and %d test rows: want some of each", path, ro.ValidationSplit, len(rows), len(train), len(test))
	}
	feats := ro.Features
	if feats == nil {
		if feats, err = adaptFeatures(path, header, label, rows, lines, train); err != nil {
			return nil, err
		}
	} else if err := checkFeatures(feats, path, header); err != nil {
		return nil, err
	}
	set := &data.ImageSet{Dir: path, Features: feats, ClassNames: names}
	for i, split := range [][]int{train, test} {
		im, err := encode(feats, path, header, rows, lines, ids, split)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			set.Train = im
		} else {
			set.Test = im
		}
	}
	if set.Classes = len(names); set.Classes == 0 {
		set.Classes = set.NumClasses()
	}
	if set.Classes < 2 {
		return nil, fmt.Errorf("%s: column %s holds one class: a classification data set needs at least 2", path, header[label])
	}
	return set, nil
}

// csvError names the line (and field) of a CSV parse error.
func csvError(path string, err error, fields int) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		if errors.Is(pe.Err, csv.ErrFieldCount) {
			return fmt.Errorf("%s: line %d: the row has another number of fields than the header's %d: every row needs one value per column (quote a value holding a comma)", path, pe.StartLine, fields)
		}
		return fmt.Errorf("%s: line %d, field %d: %w: fix the row", path, pe.Line, pe.Column, pe.Err)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// adaptFeatures computes the columns' encoding from the training rows:
// a column whose first training value is a number is numeric (and every
// value of it must be), else one-hot over its training values.
func adaptFeatures(path string, header []string, label int, rows [][]string, lines, train []int) (*data.Features, error) {
	f := &data.Features{Label: header[label]}
	for j, name := range header {
		if j == label {
			continue
		}
		if _, err := strconv.ParseFloat(rows[train[0]][j], 64); err != nil {
			seen := map[string]bool{}
			for _, i := range train {
				seen[rows[i][j]] = true
			}
			if len(seen) > maxCategories {
				return nil, fmt.Errorf("%s: column %s holds %d distinct strings in the training rows: too many to one-hot (at most %d); drop the column or encode it as numbers", path, name, len(seen), maxCategories)
			}
			vals := make([]string, 0, len(seen))
			for v := range seen {
				vals = append(vals, v)
			}
			slices.Sort(vals)
			f.Columns = append(f.Columns, data.Feature{Name: name, Values: vals})
			continue
		}
		var sum, sq float64
		for _, i := range train {
			v, err := csvNumber(path, rows[i][j], lines[i], name)
			if err != nil {
				return nil, err
			}
			sum += v
			sq += v * v
		}
		n := float64(len(train))
		mean := sum / n
		std := math.Sqrt(max(0, sq/n-mean*mean))
		if !(std > 1e-12) || math.IsInf(std, 0) {
			std = 1
		}
		f.Columns = append(f.Columns, data.Feature{Name: name, Mean: mean, Std: std})
	}
	return f, nil
}

// csvNumber parses a numeric column's value.
func csvNumber(path, s string, line int, col string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%s: line %d, column %s: %q is not a finite number, and the column's first training value is: fix the value, or quote every value of a string column", path, line, col, s)
	}
	return v, nil
}

// check says whether the table's header has the columns f encodes.
func checkFeatures(f *data.Features, path string, header []string) error {
	for _, c := range f.Columns {
		if !slices.Contains(header, c.Name) {
			return fmt.Errorf("%s has no column %s, which the model was trained on: evaluate it on a table with the training columns", path, c.Name)
		}
	}
	if !slices.Contains(header, f.Label) {
		return fmt.Errorf("%s has no label column %s, which the model was trained with", path, f.Label)
	}
	return nil
}

// csvLabels reads the label column: class ids 0..255 if every value is
// one (names nil), else class names, the sorted distinct values.
func csvLabels(path, col string, label int, rows [][]string, lines []int) ([]uint8, []string, error) {
	ids := make([]uint8, len(rows))
	numeric := true
	for i, rec := range rows {
		v, err := strconv.Atoi(rec[label])
		if err != nil {
			numeric = false
			break
		}
		if v < 0 || v > (data.MaxClasses-1) {
			return nil, nil, fmt.Errorf("%s: line %d, column %s: label %d is out of range 0..%d (at most 256 classes); use class names or ids from 0", path, lines[i], col, v, (data.MaxClasses - 1))
		}
		ids[i] = uint8(v)
	}
	if numeric {
		return ids, nil, nil
	}
	seen := map[string]bool{}
	for _, rec := range rows {
		seen[rec[label]] = true
	}
	if len(seen) > data.MaxClasses {
		return nil, nil, fmt.Errorf("%s: column %s holds %d classes: at most %d", path, col, len(seen), data.MaxClasses)
	}
	names := make([]string, 0, len(seen))
	for v := range seen {
		names = append(names, v)
	}
	slices.Sort(names)
	for i, rec := range rows {
		ids[i] = uint8(slices.Index(names, rec[label]))
	}
	return ids, names, nil
}

// encode makes the rows of split into Images of 1×Width float rows.
func encode(f *data.Features, path string, header []string, rows [][]string, lines []int, ids []uint8, split []int) (*data.Images, error) {
	w := f.Width()
	im := &data.Images{N: len(split), Rows: 1, Cols: w, Channels: 1, Floats: make([]float32, 0, len(split)*w), Norm: data.NoNorm}
	cols := make([]int, len(f.Columns))
	for k, c := range f.Columns {
		cols[k] = slices.Index(header, c.Name)
	}
	for _, i := range split {
		for k, c := range f.Columns {
			s := rows[i][cols[k]]
			if c.Values != nil {
				at := len(im.Floats)
				im.Floats = append(im.Floats, make([]float32, len(c.Values))...)
				if v, ok := slices.BinarySearch(c.Values, s); ok {
					im.Floats[at+v] = 1
				}
				continue
			}
			v, err := csvNumber(path, s, lines[i], c.Name)
			if err != nil {
				return nil, err
			}
			im.Floats = append(im.Floats, float32((v-c.Mean)/c.Std))
		}
		im.Labels = append(im.Labels, ids[i])
	}
	return im, nil
}
