package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/meshtrain/meshtrain/collective/p2p"
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
// at once, naming the limit (ulimit -n) and what it would take, and so is
// any count over p2p.MaxPeers, whatever the limit.
func checkPeerCount(c *cli.Context, workers int) error {
	limit := openFilesLimit()
	if workers < 2 {
		return nil
	}
	if limit == 0 {
		return checkPeerMax(workers)
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
	return checkPeerMax(workers)
}

// checkPeerMax refuses, whatever ulimit -n allows, more workers than a
// cluster may have (p2p.MaxPeers, which says why).
func checkPeerMax(workers int) error {
	if workers > p2p.MaxPeers {
		return usageError{fmt.Errorf("%d workers: more than the maximum of %d, whatever ulimit -n allows: every peer connects to every other and derives every peer's identity before it starts; run at most %d", workers, p2p.MaxPeers, p2p.MaxPeers)}
	}
	return nil
}
