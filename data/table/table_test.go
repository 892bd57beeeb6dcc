package table

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meshtrain/meshtrain/data"
)

const small = `age,colour,size,label
30,red,1.5,yes
40,blue,2.5,no
50,red,3.5,yes
60,green,4.5,no
20,blue,0.5,yes
70,red,5.5,no
35,green,1.0,yes
45,blue,2.0,no
55,red,3.0,yes
65,green,4.0,no
25,blue,6.0,yes
75,red,7.0,no
`

// TestReadCSV: numeric columns are standardised with the training
// rows' mean and (population) deviation, string columns one-hot over
// the training values, string labels become sorted class names; the
// opener tells a .csv by its name.
func TestReadCSV(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.csv")
	if err := os.WriteFile(path, []byte(small), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := data.ReadOptions{ValidationSplit: 0.5, SplitSeed: 4}
	set, err := data.OpenImages(context.Background(), path, data.ImageOptions{Read: ro})
	if err != nil {
		t.Fatal(err)
	}
	if set.Format != data.FormatCSV || !slices.Equal(set.ClassNames, []string{"no", "yes"}) || set.Train.N+set.Test.N != 12 || set.Train.N < 3 || set.Test.N == 0 {
		t.Fatalf("format %q, classes %v, %d+%d rows", set.Format, set.ClassNames, set.Train.N, set.Test.N)
	}
	f := set.Features
	if f.Label != "label" || len(f.Columns) != 3 || f.Columns[1].Values == nil || f.Columns[0].Values != nil || f.Width() != 2+len(f.Columns[1].Values) {
		t.Fatalf("features %+v", f)
	}
	// The numeric columns of the training rows have mean 0 and std 1.
	w := f.Width()
	for _, col := range []int{0, w - 1} {
		var sum, sq float64
		for i := range set.Train.N {
			v := float64(set.Train.Floats[i*w+col])
			sum, sq = sum+v, sq+v*v
		}
		n := float64(set.Train.N)
		if mean, std := sum/n, math.Sqrt(sq/n-sum*sum/n/n); math.Abs(mean) > 1e-6 || math.Abs(std-1) > 1e-6 {
			t.Errorf("column %d: training mean %v, std %v; want 0, 1", col, mean, std)
		}
	}
	// Read again with the recorded features (eval), the same rows.
	ro.Features = f
	again, err := Read(path, ro)
	if err != nil || !slices.Equal(again.Test.Floats, set.Test.Floats) {
		t.Fatalf("read with the recorded features: %v", err)
	}
	// --label-column picks another column; the label column is an input.
	ro = data.ReadOptions{ValidationSplit: 0.5, SplitSeed: 4, LabelColumn: "colour"}
	byColour, err := Read(path, ro)
	if err != nil || !slices.Equal(byColour.ClassNames, []string{"blue", "green", "red"}) || byColour.Features.Label != "colour" ||
		!slices.ContainsFunc(byColour.Features.Columns, func(c data.Feature) bool { return c.Name == "label" }) {
		t.Errorf("colour as labels: %v, %+v", err, byColour)
	}
}

// TestReadCSVBad: each bad table is an error naming the line and column.
func TestReadCSVBad(t *testing.T) {
	ro := data.ReadOptions{ValidationSplit: 0.5, SplitSeed: 4}
	cases := []struct {
		name, csv string
		ro        data.ReadOptions
		want      string
	}{
		{"wrong field count", "a,b,label\n1,2,0\n3,4\n5,6,1\n", ro, "t.csv: line 3: the row has another number of fields than the header's 3"},
		{"missing value", "a,b,label\n1,2,0\n3,,1\n", ro, "line 3, column b: missing value"},
		{"non-numeric", "a,b,label\n1,2,0\n3,4,1\n5,6,1\n1,2,0\n1,2,0\n1,2,0\n1,2,0\n1,2,0\n1,x,1\n", ro, `line 10, column b: "x" is not a finite number`},
		{"no label column", "a,b,label\n1,2,0\n", data.ReadOptions{ValidationSplit: 0.3, LabelColumn: "class"}, `has no column "class": its columns are a, b, label`},
		{"no split", "a,b,label\n1,2,0\n3,4,1\n", data.ReadOptions{}, "give --validation-split"},
		{"empty", "", ro, "is empty"},
		{"one class", "a,label\n1,0\n2,0\n3,0\n4,0\n5,0\n6,0\n7,0\n8,0\n", ro, "holds one class"},
		{"repeated name", "a,a,label\n1,2,0\n", ro, "empty or repeated"},
		{"label out of range", "a,label\n1,0\n2,300\n3,1\n4,0\n5,1\n6,0\n7,0\n8,0\n", ro, "line 3, column label: label 300 is out of range 0..255"},
		{"bare quote", "a,label\n1,0\n2\"x,1\n", ro, "line 3, field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseCSV("t.csv", []byte(c.csv), c.ro)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// FuzzParseCSV: no table makes the reader panic; an accepted one's
// rows fill its width and its labels its classes.
func FuzzParseCSV(f *testing.F) {
	f.Add([]byte(small))
	f.Add([]byte("a,b,label\n1,2,0\n3,4\n"))
	f.Add([]byte("x,label\n\"1,2\",a\n3,b\n"))
	f.Add([]byte(fmt.Sprintf("a,label\n%g,1\n2,0\n", math.Inf(1))))
	f.Fuzz(func(t *testing.T, b []byte) {
		set, err := parseCSV("fuzz.csv", b, data.ReadOptions{ValidationSplit: 0.5, SplitSeed: 1})
		if err != nil {
			return
		}
		w := set.Features.Width()
		for _, im := range []*data.Images{set.Train, set.Test} {
			if im.Cols != w || len(im.Floats) != im.N*w || len(im.Labels) != im.N {
				t.Fatalf("%d rows of width %d: %d values, %d labels", im.N, im.Cols, len(im.Floats), len(im.Labels))
			}
			for _, l := range im.Labels {
				if int(l) >= set.Classes {
					t.Fatalf("label %d of %d classes", l, set.Classes)
				}
			}
			for _, v := range im.Floats {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					t.Fatalf("non-finite input %v", v)
				}
			}
		}
	})
}
