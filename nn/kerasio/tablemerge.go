package kerasio

import (
	"fmt"

	"github.com/meshtrain/meshtrain/nn"
)

// The rows of the merge layers besides Add: Keras's layers of the same
// names. Element-wise merges keep their inputs' order (which must agree,
// see plan.orders); Concatenate joins a vector's orders one after the
// other.
func init() {
	for kind, class := range map[string]string{
		"subtract": "Subtract", "multiply": "Multiply", "average": "Average", "maximum": "Maximum", "minimum": "Minimum",
	} {
		rules[kind] = rule{flow: keep, keras: func(nn.LayerSpec, layerContext) (string, map[string]any, error) {
			return class, map[string]any{}, nil
		}}
	}
	rules["concatenate"] = rule{flow: concat, keras: concatenateLayer}
}

func concatenateLayer(s nn.LayerSpec, _ layerContext) (string, map[string]any, error) {
	c, ok := s.(nn.Concatenate)
	if !ok {
		return "", nil, fmt.Errorf("%s: not a Concatenate", nn.Kind(s))
	}
	axis := c.Axis
	if axis == 0 {
		axis = -1
	}
	return "Concatenate", map[string]any{"axis": axis}, nil
}

// concatOrder is the order of vectors of the given orders and sizes
// joined one after the other: nil when all are nil.
func concatOrder(orders []order, sizes []int) order {
	if !anyOrder(orders) {
		return nil
	}
	var out order
	base := 0
	for k, o := range orders {
		for i := range sizes[k] {
			out = append(out, base+o.at(i))
		}
		base += sizes[k]
	}
	return out
}

// anyOrder reports whether any of orders is not nil.
func anyOrder(orders []order) bool {
	for _, o := range orders {
		if o != nil {
			return true
		}
	}
	return false
}
