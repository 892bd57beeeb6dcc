package main

import (
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/internal/atomicfile"
	"github.com/meshtrain/meshtrain/mirrored/evaluate"
	"github.com/meshtrain/meshtrain/nn"
	"github.com/meshtrain/meshtrain/nn/kerasio"
	"github.com/meshtrain/meshtrain/nn/onnx"
)

// The formats export writes.
const (
	exportTFJS = "tfjs"
	exportONNX = "onnx"
)

func init() {
	register(&cli.Command{
		Name:      "export",
		Usage:     "write a checkpoint's model as a TensorFlow.js layers model or an ONNX model",
		ArgsUsage: " ",
		Description: "Writes the model a checkpoint holds, with its parameters and batch-normalization statistics, in a format other\n" +
			"runtimes load, computing what `meshtrain eval` computes (to float rounding):\n" +
			"  tfjs: DIR/model.json (a Keras model's topology, as TF.js writes it) and its weight file, which\n" +
			"        tf.loadLayersModel loads, and tensorflowjs_converter --input_format=tfjs_layers_model\n" +
			"        --output_format=keras turns into a Keras .h5; weights laid out as Keras's (kernels\n" +
			"        transposed, a Dense after a Flatten of several channels reordered to Keras's H×W×C).\n" +
			"  onnx: one .onnx file (opset 13) taking N×H×W×C images (channels last, as Keras) as \"input\" and\n" +
			"        giving \"output\", N × outputs (probabilities after a final softmax), which onnxruntime runs.",
		CustomHelpTemplate: withExample("meshtrain export --checkpoint ckpt/ckpt-000000936.safetensors --format tfjs --out web_model\n" +
			"   meshtrain export --checkpoint ckpt/ckpt-000000936.safetensors --format onnx --out model.onnx"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "checkpoint", Usage: "checkpoint file (ckpt-*.safetensors) written by meshtrain train, worker or launch (required)"},
			&cli.StringFlag{Name: "format", Usage: "tfjs (a TensorFlow.js layers model: --out is a directory) or onnx (--out is a .onnx file) (required)"},
			&cli.StringFlag{Name: "out", Usage: "where to write: a directory for tfjs (made if missing), a file for onnx (required)"},
			modelFileFlag(true),
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usageError{fmt.Errorf("export takes no arguments, got %q", c.Args().Slice())}
			}
			for _, f := range []string{"checkpoint", "format", "out"} {
				if c.String(f) == "" {
					return usageError{fmt.Errorf("export needs --%s (see meshtrain export --help)", f)}
				}
			}
			format, out := c.String("format"), c.String("out")
			if format != exportTFJS && format != exportONNX {
				return usageError{fmt.Errorf("export: --format %q: want %s or %s", format, exportTFJS, exportONNX)}
			}
			m, err := readModelFile(c)
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			var want *nn.Architecture
			if m != nil {
				want = &m.Arch
			}
			model, arch, err := evaluate.Load(c.String("checkpoint"), want)
			if err != nil {
				return usageError{fmt.Errorf("export: %w", err)}
			}
			// The exported model takes the data as stored: the training
			// normalisation becomes its first layer.
			arch, model, added, err := evaluate.WithInputNorm(c.String("checkpoint"), arch, model)
			if err != nil {
				return usageError{fmt.Errorf("export: %w", err)}
			}
			// A model the format cannot hold is refused (exit 2) before
			// anything is written; a failed write is an error of its own.
			var onnxModel []byte
			switch format {
			case exportTFJS:
				_, err = kerasio.Export(arch, model)
			case exportONNX:
				onnxModel, err = onnx.Encode(arch, model)
			}
			if err != nil {
				return usageError{fmt.Errorf("export: %s as %s: %w", c.String("checkpoint"), format, err)}
			}
			if format == exportTFJS {
				err = kerasio.WriteTFJS(out, arch, model)
				out = filepath.Join(out, kerasio.ModelJSON)
			} else {
				err = atomicfile.WriteFile(out, onnxModel, 0o644)
			}
			if err != nil {
				return fmt.Errorf("export: %w", err)
			}
			fmt.Printf("%s: %s (%d parameters) written as %s to %s\n", c.String("checkpoint"), arch.Name, len(model.Params()), format, out)
			norm, _ := evaluate.Inputs(c.String("checkpoint"))
			switch added {
			case "rescaling":
				fmt.Printf("its first layer is a Rescaling that applies the training normalisation, %s: feed it the data as stored\n", norm)
			case "normalization":
				fmt.Printf("its first layer is a Normalization that standardises the table's numeric columns as in training: feed it their values as read, string columns one-hot in the checkpoint's order\n")
			default:
				fmt.Printf("it takes its inputs as meshtrain eval feeds them (%s)\n", norm)
			}
			return nil
		},
	})
}
