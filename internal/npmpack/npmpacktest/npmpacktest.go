// Package npmpacktest serves tarballs as npm's registry does, for tests
// of the data sets' fetches: the path npmpack.TarballURL names, a count of
// the downloads, and the ways a registry fails (an error status, a hang,
// a slow answer).
package npmpacktest

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/npmpack"
)

// Registry is a test's npm registry holding one package's tarball.
type Registry struct {
	// URL is the registry's address, for MNISTOptions.Registry or
	// $MESHTRAIN_NPM_REGISTRY.
	URL   string
	calls atomic.Int64
}

// Behaviour changes how the registry answers.
type Behaviour struct {
	// Delay is waited before answering.
	Delay time.Duration
	// Status, if not 0, is answered instead of the tarball, with Body.
	Status int
	Body   string
	// Hang answers nothing more until the client gives up: after the
	// first Partial bytes of the tarball (sent at once), or before any.
	Hang    bool
	Partial int
}

// New serves tgz as spec's tarball ("name@version") until the test ends;
// any other path is a 404, as the registry answers.
func New(t testing.TB, spec string, tgz []byte, b Behaviour) *Registry {
	t.Helper()
	r := &Registry{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		want, _ := npmpack.TarballURL("http://"+req.Host, spec)
		if !strings.HasSuffix(want, req.URL.Path) || req.Method != http.MethodGet {
			http.Error(w, `{"error":"Not found"}`, http.StatusNotFound)
			return
		}
		r.calls.Add(1)
		if b.Hang {
			if b.Partial > 0 {
				w.Header().Set("Content-Length", strconv.Itoa(len(tgz)))
				w.Write(tgz[:min(b.Partial, len(tgz))])
				w.(http.Flusher).Flush()
			}
			<-req.Context().Done()
			return
		}
		time.Sleep(b.Delay)
		if b.Status != 0 {
			http.Error(w, b.Body, b.Status)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(tgz)
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/"
	return r
}

// Calls is how many times the tarball was asked for.
func (r *Registry) Calls() int { return int(r.calls.Load()) }
