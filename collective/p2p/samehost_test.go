package p2p

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/meshtrain/meshtrain/collective"
	"github.com/meshtrain/meshtrain/collective/p2p/intrahost"
)

// startLocal starts n transports on 127.0.0.1 with the same-host link.
func startLocal(t testing.TB, n int, log *zap.Logger, opts collective.Options) ([]*collective.Comm, []*Transport) {
	t.Helper()
	peers := freeAddrs(t, n, false)
	return startWith(t, n, opts, func(r int) (*Transport, error) {
		return New(context.Background(), Config{Rank: r, Peers: peers, ClusterSecret: testSecret, IntraHost: IntraHostAuto, Timeout: 20 * time.Second, Logger: log})
	})
}

func skipWithoutSameHost(t *testing.T) {
	if !intrahost.Supported {
		t.Skip("the same-host link needs Linux")
	}
}

// TestSameHostAllReduce: with --intra-host auto, ranks on one host link
// over shared memory (every outbound link is a same-host one, and the
// rings are mapped), and the algorithms run over it unchanged.
func TestSameHostAllReduce(t *testing.T) {
	skipWithoutSameHost(t)
	for _, tc := range []struct {
		n    int
		algo collective.Algo
	}{{2, collective.Ring}, {3, collective.Ring}, {4, collective.Tree}, {4, collective.Star}, {3, collective.Auto}} {
		t.Run(fmt.Sprintf("n%d/%s", tc.n, tc.algo), func(t *testing.T) {
			// Chunks of 64 KiB and a 100,003-float buffer wrap every ring.
			comms, ts := startLocal(t, tc.n, zap.NewNop(), collective.Options{Timeout: 20 * time.Second, ChunkBytes: 64 << 10, Algo: tc.algo})
			for r, tr := range ts {
				for q, l := range tr.out {
					if q != r && l.local == nil {
						t.Fatalf("rank %d's link to rank %d is not a same-host link", r, q)
					}
				}
			}
			if got := ringMaps(t); got < 2*tc.n*(tc.n-1) {
				t.Fatalf("%d ring mappings in this process, want %d (one per link end)", got, 2*tc.n*(tc.n-1))
			}
			checkAllReduce(t, comms)
			// A frame larger than half a ring follows its header on the socket.
			msg := bytes.Repeat([]byte{7}, intrahost.RingBytes/2+1)
			noErr(t, onAll(comms, func(c *collective.Comm) error {
				switch c.Rank() {
				case 0:
					return c.Send(context.Background(), tc.n-1, 9, msg)
				case tc.n - 1:
					got, err := c.Recv(context.Background(), 0, 9)
					if err == nil && !bytes.Equal(got, msg) {
						err = fmt.Errorf("a %d-byte message arrived as %d bytes, or altered", len(msg), len(got))
					}
					return err
				}
				return nil
			}))
		})
	}
	if got := ringMaps(t); got != 0 {
		t.Fatalf("%d ring mappings remain after every transport closed", got)
	}
}

func noErr(t *testing.T, errs []error) {
	t.Helper()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// ringMaps counts this process's mappings of same-host rings.
func ringMaps(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "memfd:meshtrain-ring")
}

// TestSameHostSettingCompared: a peer with --intra-host tls and one with
// auto fail at start-up, naming the setting.
func TestSameHostSettingCompared(t *testing.T) {
	peers := freeAddrs(t, 2, false)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Go(func() {
			mode := []IntraHost{IntraHostAuto, IntraHostTLS}[r]
			tr, err := New(context.Background(), Config{Rank: r, Peers: peers, ClusterSecret: testSecret, IntraHost: mode, Timeout: 10 * time.Second})
			if err == nil {
				_ = tr.Close()
			}
			errs[r] = err
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "--intra-host") {
			t.Fatalf("rank %d: %v, want an error naming --intra-host", r, err)
		}
	}
	if _, err := ParseIntraHost("shm"); err == nil || !strings.Contains(err.Error(), "want auto") {
		t.Fatalf("ParseIntraHost(shm) = %v", err)
	}
}

// TestSameHostWithoutSecretRefused: a local process that knows the
// socket's name but not the cluster secret is refused, logged, and gets
// no ring; the cluster goes on.
func TestSameHostWithoutSecretRefused(t *testing.T) {
	skipWithoutSameHost(t)
	core, logs := observer.New(zapcore.WarnLevel)
	comms, ts := startLocal(t, 2, zap.New(core), collective.Options{Timeout: 20 * time.Second})
	before := ringMaps(t)
	wrong, err := deriveKey([]byte("another secret, 32 bytes long..."), localInfo)
	if err != nil {
		t.Fatal(err)
	}
	err = dialAs(ts[0].local.ln.Name(), wrong, ts[0], 1)
	if err == nil {
		t.Fatal("a dialer without the secret got a ring")
	}
	waitLog(t, logs, "refused a same-host link", "did not prove it holds the cluster secret")
	if got := ringMaps(t); got != before {
		t.Fatalf("ring mappings went from %d to %d", before, got)
	}
	checkAllReduce(t, comms)
}

// dialAs dials a same-host listener as rank claimed, proving with key,
// and takes the ring (which it then closes).
func dialAs(name string, key []byte, tr *Transport, claimed int) error {
	s, err := linkAs(name, key, tr, claimed)
	if err == nil {
		s.Close()
	}
	return err
}

// linkAs is dialAs returning the link.
func linkAs(name string, key []byte, tr *Transport, claimed int) (*intrahost.Sender, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := intrahost.Dial(ctx, name)
	if err != nil {
		return nil, err
	}
	var hello [localHello]byte
	binary.BigEndian.PutUint32(hello[0:], localMagic)
	binary.BigEndian.PutUint32(hello[4:], uint32(claimed))
	binary.BigEndian.PutUint32(hello[8:], uint32(os.Getpid()))
	if _, err := c.Write(hello[:]); err == nil {
		err = mutualChallenge(ctx, c, key, tr.ids[claimed], tr.ids[tr.cfg.Rank], [2]string{localDialer, localListener}, true)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	s, err := intrahost.Take(c)
	if err != nil {
		c.Close()
	}
	return s, err
}

// TestSameHostOversizeFrame: a member on the same host, admitted, that
// sends a frame past the bound loses its link at the header, before any
// of the payload is read, and the rank names it.
func TestSameHostOversizeFrame(t *testing.T) {
	skipWithoutSameHost(t)
	tr, _, err := newTransport(Config{Rank: 0, Peers: freeAddrs(t, 2, false), ClusterSecret: testSecret, IntraHost: IntraHostAuto, MaxFrame: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tr.ctx, tr.stop = context.WithCancel(context.Background())
	defer tr.stop()
	tr.listenLocal()
	defer tr.closeLocal()
	s, err := linkAs(tr.local.ln.Name(), tr.local.key, tr, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	go func() {
		_ = s.Send(context.Background(), collective.Header{Kind: collective.KindP2P, DType: collective.Bytes}, make([]byte, 4<<20))
	}()
	select {
	case <-tr.Failed().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the oversize frame did not take the link down within 10 s")
	}
	if err := tr.Failure(); !strings.Contains(fmt.Sprint(err), "rank 1") || !strings.Contains(fmt.Sprint(err), "exceeds") {
		t.Fatalf("failure %v, want rank 1's frame past the bound", err)
	}
}

func waitLog(t *testing.T, logs *observer.ObservedLogs, msg, errPart string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		for _, e := range logs.FilterMessage(msg).All() {
			if strings.Contains(fmt.Sprint(e.ContextMap()["error"]), errPart) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %q log with %q within 10 s; logs: %v", msg, errPart, logs.All())
}

// TestSameHostOtherUserRefused: a process of another user (nobody), even
// one holding the secret, is refused by its kernel credentials. Needs
// root, to start it under another uid.
func TestSameHostOtherUserRefused(t *testing.T) {
	skipWithoutSameHost(t)
	if os.Getuid() != 0 {
		t.Skip("needs root to run a process as another user")
	}
	core, logs := observer.New(zapcore.WarnLevel)
	_, ts := startLocal(t, 2, zap.New(core), collective.Options{Timeout: 20 * time.Second})
	key, err := deriveKey(testSecret, localInfo)
	if err != nil {
		t.Fatal(err)
	}
	out, err := helper(t, helperJob{Mode: "dial", Name: ts[0].local.ln.Name(), Key: key, IDs: peerIDs(ts[0])}, &syscall.Credential{Uid: 65534, Gid: 65534})
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(out, "refused:") {
		t.Fatalf("the other user's dial was not refused: %s", out)
	}
	waitLog(t, logs, "refused a same-host link", "runs as uid 65534")
}

func peerIDs(tr *Transport) []string {
	ids := make([]string, len(tr.ids))
	for i, id := range tr.ids {
		ids[i] = id.String()
	}
	return ids
}

// helperJob is what a helper process does (TestSameHostHelper).
type helperJob struct {
	Mode  string   // "dial": dial Name as rank 1 with Key; "rank": be rank Rank of Peers
	Name  string   `json:",omitempty"`
	Key   []byte   `json:",omitempty"`
	IDs   []string `json:",omitempty"`
	Rank  int      `json:",omitempty"`
	Peers []string `json:",omitempty"`
}

const helperEnv = "MESHTRAIN_SAMEHOST_HELPER"

// helper runs this test binary as a helper process (copied where another
// user may run it, when cred is set) and returns its output.
func helper(t *testing.T, job helperJob, cred *syscall.Credential) (string, error) {
	cmd, out := helperCmd(t, job, cred)
	err := cmd.Run()
	return out.String(), err
}

func helperCmd(t *testing.T, job helperJob, cred *syscall.Credential) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if cred != nil {
		dir, err := os.MkdirTemp("", "samehost")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(dir, "p2p.test")
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	j, _ := json.Marshal(job)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bin, "-test.run=^TestSameHostHelper$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(j))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return cmd, &out
}

// TestSameHostHelper is the helper process's body; it does nothing
// unless started by helper.
func TestSameHostHelper(t *testing.T) {
	j := os.Getenv(helperEnv)
	if j == "" {
		t.Skip("a helper process for the same-host tests")
	}
	var job helperJob
	if err := json.Unmarshal([]byte(j), &job); err != nil {
		t.Fatal(err)
	}
	switch job.Mode {
	case "dial":
		tr := &Transport{cfg: Config{Rank: 0}}
		for _, s := range job.IDs {
			id, err := peer.Decode(s)
			if err != nil {
				t.Fatal(err)
			}
			tr.ids = append(tr.ids, id)
		}
		if err := dialAs(job.Name, job.Key, tr, 1); err != nil {
			fmt.Println("refused:", err)
			return
		}
		fmt.Println("admitted")
	case "rank":
		runHelperRank(t, job)
	}
}

// runHelperRank is rank job.Rank of a same-host cluster, all-reducing
// until it fails (or is killed).
func runHelperRank(t *testing.T, job helperJob) {
	tr, err := New(context.Background(), Config{Rank: job.Rank, Peers: job.Peers, ClusterSecret: testSecret, IntraHost: IntraHostAuto, Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	c, err := collective.New(tr, collective.Options{Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]float32, 1<<20)
	for i := 0; ; i++ {
		if err := c.AllReduceFloat32(context.Background(), buf, collective.Sum); err != nil {
			fmt.Println("helper failed:", err)
			_ = tr.Close()
			return
		}
		if i == 0 {
			fmt.Println("ready")
		}
	}
}

// TestSameHostKilledPeer: a peer process SIGKILLed mid-exchange makes
// the survivors fail within the deadline, naming it, and leaves no shared
// memory behind: nothing in /dev/shm, and no ring mapped once the
// survivors close.
func TestSameHostKilledPeer(t *testing.T) {
	skipWithoutSameHost(t)
	if testing.Short() {
		t.Skip("starts a peer process")
	}
	peers := freeAddrs(t, 3, false)
	cmd, out := helperCmd(t, helperJob{Mode: "rank", Rank: 2, Peers: peers}, nil)
	pr, pw := io.Pipe()
	w := io.MultiWriter(out, pw) // one writer for both: exec then copies with one goroutine
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if sc.Text() == "ready" {
				close(ready)
				break
			}
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); pw.Close() }()
	comms, ts := startWith(t, 2, collective.Options{Timeout: 20 * time.Second}, func(r int) (*Transport, error) {
		return New(context.Background(), Config{Rank: r, Peers: peers, ClusterSecret: testSecret, IntraHost: IntraHostAuto, Timeout: 20 * time.Second})
	})
	for r, tr := range ts {
		if tr.out[2].local == nil {
			t.Fatalf("rank %d's link to the helper is not a same-host link", r)
		}
	}
	killedAt := make(chan time.Time, 1)
	steady := make(chan struct{})
	go func() {
		<-ready
		<-steady
		killedAt <- time.Now()
		_ = cmd.Process.Signal(syscall.SIGKILL)
	}()
	errs := onAll(comms, func(c *collective.Comm) error {
		buf := make([]float32, 1<<20)
		for i := 0; ; i++ {
			if err := c.AllReduceFloat32(context.Background(), buf, collective.Sum); err != nil {
				return err
			}
			if i == 3 && c.Rank() == 0 {
				close(steady)
			}
		}
	})
	var took time.Duration
	select {
	case k := <-killedAt:
		took = time.Since(k)
	default:
		t.Fatalf("the survivors failed before the helper was killed: %v (helper: %s)", errors.Join(errs...), out)
	}
	for r, err := range errs {
		if !strings.Contains(fmt.Sprint(err), "rank 2") {
			t.Fatalf("rank %d: %v, want an error naming rank 2 (helper: %s)", r, err, out)
		}
	}
	if took > 5*time.Second {
		t.Fatalf("the survivors took %v to notice the kill", took)
	}
	if ringMaps(t) == 0 {
		t.Fatal("no ring mapped before the survivors closed: the links were not same-host ones")
	}
	closeAll(ts)
	if got := ringMaps(t); got != 0 {
		t.Fatalf("%d ring mappings remain after the survivors closed", got)
	}
	shm, err := os.ReadDir("/dev/shm")
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range shm {
		if strings.Contains(e.Name(), "meshtrain") {
			t.Fatalf("/dev/shm holds %s", e.Name())
		}
	}
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("helper: %v", err)
	}
}
