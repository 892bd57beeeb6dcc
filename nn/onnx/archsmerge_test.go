package onnx

import "github.com/meshtrain/meshtrain/nn/internal/testmodels"

// The merge layers and ResNet-20, in the test models (testmodels.Merges,
// testmodels.ResNet20Scores).
func init() {
	archs["merges"] = testmodels.Merges(true)
	a, err := testmodels.ResNet20Scores("../keras/testdata")
	if err != nil {
		panic(err)
	}
	archs["resnet20"] = a
}
