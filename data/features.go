package data

// Features is how a table's raw columns became a model's inputs, as a
// Keras preprocessing stack adapted to the training split would make
// them: each numeric column standardised, (x - Mean)/Std, with the
// training split's mean and standard deviation (the population's, as
// keras.layers.Normalization.adapt computes it; Std 1 for a constant
// column); each string column one-hot over its training values, sorted
// (a value the training split lacks encodes as all zeros). Checkpoints
// record it, so eval encodes its rows as training did.
type Features struct {
	// Label is the label column's name.
	Label   string    `json:"label"`
	Columns []Feature `json:"columns"`
}

// Feature is one input column: numeric (Values nil) or one-hot.
type Feature struct {
	Name   string   `json:"name"`
	Mean   float64  `json:"mean,omitempty"`
	Std    float64  `json:"std,omitempty"`
	Values []string `json:"values,omitempty"`
}

// Width is the number of model inputs the columns make.
func (f *Features) Width() int {
	w := 0
	for _, c := range f.Columns {
		w += max(1, len(c.Values))
	}
	return w
}
