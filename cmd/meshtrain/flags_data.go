package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/data"
)

// dataFlagNames are the flags dataFlags defines: the data set's, read by
// dense models only.
// (--skip-corrupt, which image folders read too, is sparse-lr's flag,
// defined with the sparse flags where both read it.)
var dataFlagNames = []string{"data", "data-format", "image-size", "color-mode", "validation-split", "label-column"}

// dataFlags are --data and how it is read, on train, launch, worker,
// compare, sweep and eval: one definition, so every command reads a data
// set the same way (data.OpenImages does the reading).
func dataFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "data", Usage: "train and evaluate on this data set instead of MNIST: a NumPy .npz (x_train, y_train, x_test, y_test, as keras.datasets), " +
			"a folder of those four .npy files, a folder of class folders of images (DIR/<class>/*.png|jpg|jpeg|gif|bmp, or DIR/train/… and DIR/test/…), " +
			"a CSV table with a header row, or a folder of MNIST's IDX files; the kind is told from the path and contents"},
		&cli.StringFlag{Name: "data-format", Usage: "read --data as this kind instead of telling it from the contents: " + strings.Join(data.FormatNames, " | ")},
		&cli.StringFlag{Name: "image-size", Usage: "image folders: resize every image to HxW (e.g. 32x32), bilinear as Keras's image_dataset_from_directory; default: the files' own size, which must then be one"},
		&cli.StringFlag{Name: "color-mode", Usage: "image folders: " + data.ColorRGB + " (3 channels, the default) or " + data.ColorGrayscale + " (1)"},
		&cli.Float64Flag{Name: "validation-split", Usage: "image folders without test/, and CSV tables: hold out this fraction (e.g. 0.2) as the test split, chosen by a hash of each file's path (or row's line) and --seed, so every peer agrees"},
		&cli.StringFlag{Name: "label-column", Usage: "CSV tables: the label column's name (default: the last column)"},
	}
}

// dataFromFlags reads dataFlags: the path, its format and how to read
// it. A bad value is a usage error naming the flag.
func dataFromFlags(c *cli.Context) (path, format string, read data.ReadOptions, err error) {
	path, format = c.String("data"), c.String("data-format")
	if size, err := parseImageSize(c.String("image-size")); err != nil {
		return "", "", read, fmt.Errorf("--image-size: %w", err)
	} else {
		read.ImageSize = size
	}
	read.ColorMode = c.String("color-mode")
	read.ValidationSplit = c.Float64("validation-split")
	read.LabelColumn = c.String("label-column")
	read.SkipCorrupt = c.Bool("skip-corrupt") // false where the flag is not defined
	if err := read.Check(); err != nil {
		return "", "", read, fmt.Errorf("--image-size, --color-mode or --validation-split: %w", err)
	}
	if format != "" && !contains(data.FormatNames, format) {
		return "", "", read, fmt.Errorf("--data-format %q: want one of %s", format, strings.Join(data.FormatNames, ", "))
	}
	if path == "" {
		for _, name := range dataFlagNames[1:] {
			if c.IsSet(name) && name != "data-format" {
				return "", "", read, fmt.Errorf("--%s reads a --data set: give --data PATH", name)
			}
		}
	}
	return path, format, read, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// absData makes --data absolute, so that the workers launch starts find
// it whatever their directory.
func absData(c *cli.Context) error {
	path := c.String("data")
	if path == "" || filepath.IsAbs(path) {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("--data %s: %w", path, err)
	}
	return c.Set("data", abs)
}

// parseImageSize parses --image-size's "HxW" (or "H×W", or "N" for N×N).
func parseImageSize(s string) ([2]int, error) {
	if s == "" {
		return [2]int{}, nil
	}
	h, w, ok := strings.Cut(strings.ReplaceAll(strings.ToLower(s), "×", "x"), "x")
	if !ok {
		w = h
	}
	hi, err1 := strconv.Atoi(strings.TrimSpace(h))
	wi, err2 := strconv.Atoi(strings.TrimSpace(w))
	if err1 != nil || err2 != nil || hi < 1 || wi < 1 || hi > data.MaxImageSide || wi > data.MaxImageSide {
		return [2]int{}, fmt.Errorf("image size %q: want HxW, e.g. 32x32, each side from 1 to %d", s, data.MaxImageSide)
	}
	return [2]int{hi, wi}, nil
}
