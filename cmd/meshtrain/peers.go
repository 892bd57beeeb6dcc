package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/internal/rusage"
)

// openFilesLimit is rusage.OpenFilesLimit, a variable so that a test can
// set the limit a machine does not have.
var openFilesLimit = rusage.OpenFilesLimit

// reservedFiles are the open files a peer needs besides its links: its
// listeners, logs, data and checkpoint files, the health server.
const reservedFiles = 256

// checkPeerCount refuses, before any identity is derived or any
// connection made, a cluster this process cannot hold: every peer keeps a
// connection to every other (collective/p2p connects all pairs), each an
// open file, and compare runs every peer, both ends of every link, in
// this one process. 65,536 workers were accepted and spent 1.3 GB and
// 57 s deriving identities before timing out; now the count is refused
// at once, naming the limit (ulimit -n) and what it would take.
func checkPeerCount(c *cli.Context, workers int) error {
	limit := openFilesLimit()
	if limit == 0 || workers < 2 {
		return nil
	}
	links := int64(workers - 1)
	where := "every peer holds a connection to every other"
	if c.Command.Name == "compare" {
		links = int64(workers) * int64(workers-1)
		where = "compare runs every peer in this process, both ends of every connection"
	}
	if need := links + reservedFiles; need > limit {
		return usageError{fmt.Errorf("%d workers: %s, %d open files here (and %d for the rest), more than this process's limit of %d (ulimit -n): run fewer workers, or raise the limit",
			workers, where, links, reservedFiles, limit)}
	}
	return nil
}
