package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meshtrain/meshtrain/internal/longtest"

	"go.yaml.in/yaml/v3"

	"github.com/meshtrain/meshtrain/mirrored"
	"github.com/meshtrain/meshtrain/mirrored/launch"
	"github.com/meshtrain/meshtrain/mirrored/launch/cluster"
	"github.com/meshtrain/meshtrain/tests/netns"
)

// The Kubernetes objects of README.md's manifests, as far as these tests
// read them (field names as the API spells them).
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		TFReplicaSpecs map[string]struct {
			Replicas      int         `yaml:"replicas"`
			RestartPolicy string      `yaml:"restartPolicy"`
			Template      podTemplate `yaml:"template"`
		} `yaml:"tfReplicaSpecs"`
		PodFailurePolicy         any               `yaml:"podFailurePolicy"`
		CompletionMode           string            `yaml:"completionMode"`
		Completions              int               `yaml:"completions"`
		Parallelism              int               `yaml:"parallelism"`
		Template                 podTemplate       `yaml:"template"`
		ClusterIP                string            `yaml:"clusterIP"`
		PublishNotReadyAddresses bool              `yaml:"publishNotReadyAddresses"`
		Selector                 map[string]string `yaml:"selector"`
	} `yaml:"spec"`
}

type podTemplate struct {
	Spec struct {
		RestartPolicy                 string         `yaml:"restartPolicy"`
		Subdomain                     string         `yaml:"subdomain"`
		TerminationGracePeriodSeconds int            `yaml:"terminationGracePeriodSeconds"`
		Containers                    []k8sContainer `yaml:"containers"`
	} `yaml:"spec"`
}

type k8sContainer struct {
	Name    string   `yaml:"name"`
	Command []string `yaml:"command"`
	Args    []string `yaml:"args"`
	Env     []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	ReadinessProbe *struct {
		HTTPGet struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"`
		} `yaml:"httpGet"`
	} `yaml:"readinessProbe"`
}

// k8sPod is one pod a manifest makes: its DNS name (what the other pods
// dial), its environment and its command line.
type k8sPod struct {
	name string
	env  []string
	args []string
}

// readmeManifests parses the fenced yaml blocks of README.md's Kubernetes
// section: each block's documents.
func readmeManifests(t *testing.T) [][]k8sObject {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, sec, ok := strings.Cut(string(b), "\n## Running on a cluster\n")
	if ok {
		_, sec, ok = strings.Cut(sec, "\n### Kubernetes\n")
	}
	if !ok {
		t.Fatal(`README.md has no section "Running on a cluster", subsection "Kubernetes"`)
	}
	sec, _, _ = strings.Cut(sec, "\n## ")
	var blocks [][]k8sObject
	for _, m := range regexp.MustCompile("(?s)\n```yaml\n(.*?)\n```\n").FindAllStringSubmatch(sec, -1) {
		dec := yaml.NewDecoder(strings.NewReader(m[1]))
		var docs []k8sObject
		for {
			var o k8sObject
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("README yaml block %d: %v", len(blocks)+1, err)
			}
			docs = append(docs, o)
		}
		blocks = append(blocks, docs)
	}
	if len(blocks) != 2 {
		t.Fatalf("README's Kubernetes section has %d yaml blocks, want 2 (a TFJob; a Secret, Service and Indexed Job)", len(blocks))
	}
	return blocks
}

// k8sSecret is the cluster secret the tests put in the README's Secret.
var k8sSecret = hex.EncodeToString([]byte("the README manifests' 32 bytes.."))

// containerEnv is c's environment as the kubelet sets it, secretKeyRef
// resolved from secrets (whose placeholder value the tests replace).
func containerEnv(t *testing.T, c k8sContainer, secrets map[string]k8sObject) []string {
	t.Helper()
	var env []string
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			ref := e.ValueFrom.SecretKeyRef
			s, ok := secrets[ref.Name].StringData[ref.Key]
			if !ok {
				t.Fatalf("env %s: secret %s has no key %q", e.Name, ref.Name, ref.Key)
			}
			if strings.HasPrefix(s, "REPLACE") {
				s = k8sSecret
			}
			v = s
		}
		env = append(env, e.Name+"="+v)
	}
	return env
}

// checkPod checks what every pod template must have for worker: the
// binary's worker command, the probes on --health-addr's port, a grace
// period longer than --stop-timeout.
func checkPod(t *testing.T, what string, tmpl podTemplate) k8sContainer {
	t.Helper()
	if len(tmpl.Spec.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", what, len(tmpl.Spec.Containers))
	}
	c := tmpl.Spec.Containers[0]
	if !slices.Contains(c.Args, "worker") || !slices.Contains(c.Args, "--health-addr") {
		t.Errorf("%s: args %q: want worker with --health-addr", what, c.Args)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("%s: no readinessProbe on /readyz", what)
	}
	if g := tmpl.Spec.TerminationGracePeriodSeconds; g <= 30 {
		t.Errorf("%s: terminationGracePeriodSeconds %d: want more than --stop-timeout (25 s) and a checkpoint", what, g)
	}
	return c
}

// tfJobPods are the TFJob's pods, chief first, each with the TF_CONFIG
// the training operator writes for it.
func tfJobPods(t *testing.T, job k8sObject, secrets map[string]k8sObject) []k8sPod {
	t.Helper()
	replicas, ports := map[string]int{}, map[string]int{}
	for typ, rs := range job.Spec.TFReplicaSpecs {
		replicas[typ] = rs.Replicas
		c := checkPod(t, "TFJob "+typ, rs.Template)
		if c.Name != "tensorflow" {
			t.Errorf("TFJob %s: container %q: the operator reads the port of the container named tensorflow", typ, c.Name)
		}
		for _, p := range c.Ports {
			if p.Name == "tfjob-port" {
				ports[typ] = p.ContainerPort
			}
		}
		if rs.RestartPolicy != "ExitCode" {
			t.Errorf("TFJob %s: restartPolicy %q, want ExitCode (restart on 143 after a peer's SIGTERM)", typ, rs.RestartPolicy)
		}
	}
	var pods []k8sPod
	for _, typ := range []string{"Chief", "Worker"} {
		rs := job.Spec.TFReplicaSpecs[typ]
		c := rs.Template.Spec.Containers[0]
		for i := range rs.Replicas {
			spec, err := cluster.KubeflowTFConfig(job.Metadata.Name, job.Metadata.Namespace, "", replicas, ports, typ, i)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%s-%s-%d.%s.svc", job.Metadata.Name, strings.ToLower(typ), i, job.Metadata.Namespace)
			env := append(containerEnv(t, c, secrets), cluster.Env+"="+string(spec))
			pods = append(pods, k8sPod{name: name, env: env, args: c.Args})
		}
	}
	return pods
}

// indexedJobPods are the Indexed Job's pods, index 0 first, each with its
// JOB_COMPLETION_INDEX; it checks the Service that names them.
func indexedJobPods(t *testing.T, job, svc k8sObject, secrets map[string]k8sObject) []k8sPod {
	t.Helper()
	s := job.Spec
	if s.CompletionMode != "Indexed" || s.Completions < 2 || s.Parallelism != s.Completions {
		t.Errorf("Job: completionMode %q, completions %d, parallelism %d: want Indexed, all pods at once", s.CompletionMode, s.Completions, s.Parallelism)
	}
	if svc.Spec.ClusterIP != "None" || !svc.Spec.PublishNotReadyAddresses || svc.Spec.Selector["job-name"] != job.Metadata.Name {
		t.Errorf("Service %s: want headless (clusterIP None), publishNotReadyAddresses, selecting job-name %s", svc.Metadata.Name, job.Metadata.Name)
	}
	if s.Template.Spec.Subdomain != svc.Metadata.Name {
		t.Errorf("Job: subdomain %q, want the Service %q", s.Template.Spec.Subdomain, svc.Metadata.Name)
	}
	c := checkPod(t, "Job", s.Template)
	var pods []k8sPod
	for i := range s.Completions {
		env := append(containerEnv(t, c, secrets), fmt.Sprintf("%s=%d", cluster.JobIndexEnv, i))
		name := fmt.Sprintf("%s-%d.%s", job.Metadata.Name, i, s.Template.Spec.Subdomain) // hostname.subdomain
		pods = append(pods, k8sPod{name: name, env: env, args: c.Args})
	}
	return pods
}

// readmePods are the pods of the README's two manifests.
func readmePods(t *testing.T) (tfjob, indexed []k8sPod) {
	t.Helper()
	blocks := readmeManifests(t)
	byKind := map[string]k8sObject{}
	secrets := map[string]k8sObject{}
	for _, docs := range blocks {
		for _, o := range docs {
			byKind[o.Kind] = o
			if o.Kind == "Secret" {
				secrets[o.Metadata.Name] = o
			}
		}
	}
	for _, k := range []string{"TFJob", "Secret", "Service", "Job"} {
		if _, ok := byKind[k]; !ok {
			t.Fatalf("README's manifests have no %s", k)
		}
	}
	return tfJobPods(t, byKind["TFJob"], secrets), indexedJobPods(t, byKind["Job"], byKind["Service"], secrets)
}

// podCluster is the cluster worker makes of pod's environment (the same
// function, cluster.Discover: TF_CONFIG first, else the Indexed Job's
// variables).
func podCluster(t *testing.T, pod k8sPod) *cluster.Cluster {
	t.Helper()
	env := map[string]string{}
	for _, kv := range pod.env {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	c, err := cluster.Discover(cluster.DiscoverOptions{Lookup: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatalf("pod %s: no cluster from %q: %v", pod.name, pod.env, err)
	}
	return c
}

// checkPodClusters: pod i is rank i, every pod lists the same peers, and
// peer i is pod i's DNS name.
func checkPodClusters(t *testing.T, what string, pods []k8sPod) {
	t.Helper()
	var first []string
	for i, pod := range pods {
		c := podCluster(t, pod)
		if first == nil {
			first = c.Peers
		}
		if c.Rank != i || !slices.Equal(c.Peers, first) {
			t.Errorf("%s pod %s: rank %d of %q, want rank %d of %q", what, pod.name, c.Rank, c.Peers, i, first)
		}
		if host, _, _ := strings.Cut(c.Peers[i], ":"); host != pod.name {
			t.Errorf("%s pod %d: peer address %s, but the pod's name is %s", what, i, c.Peers[i], pod.name)
		}
	}
}

// podArgs are a pod's command line for a test on this machine: the
// manifest's, with --data-dir left to find the test's MNIST, /ckpt at
// ckdir, and a short run after it.
func podArgs(args []string, ckdir string, extra ...string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--data-dir":
			i++
		case strings.HasPrefix(a, "/ckpt"):
			out = append(out, ckdir+strings.TrimPrefix(a, "/ckpt"))
		default:
			out = append(out, a)
		}
	}
	return append(out, extra...)
}

// shortPodRun makes the manifests' LeNet run a short softmax one.
var shortPodRun = []string{"--model", "softmax", "--epochs", "1", "--batch", "32", "--train-examples", "3000",
	"--test-examples", "500", "--hash-every", "20", "--collective-timeout", "30s"}

// checkJSONLines fails unless every line of stderr is a JSON object.
func checkJSONLines(t *testing.T, who, stderr string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimRight(stderr, "\n"), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil || m["msg"] == nil {
			t.Errorf("%s: a stderr line that is no JSON log entry: %q", who, line)
		}
	}
}

// podNames maps pod i's name to host at(i).
func podNames(pods []k8sPod, at func(i int) int) map[string]int {
	m := map[string]int{}
	for i, p := range pods {
		m[p.name] = at(i)
	}
	return m
}

// sigtermExitCode is the exit code of a worker started with args that got
// SIGTERM and stopped cleanly: the args' --sigterm-exit-code, else the
// default worker's help states.
func sigtermExitCode(t *testing.T, args []string) int {
	t.Helper()
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--sigterm-exit-code="); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
		if a == "--sigterm-exit-code" && i+1 < len(args) {
			n, _ := strconv.Atoi(args[i+1])
			return n
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := meshtrain(ctx, nil, "worker", "--help")
	m := regexp.MustCompile(`--sigterm-exit-code value[^\n]*\(default: (\d+)\)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("worker --help states no default of --sigterm-exit-code:\n%s", r)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// TestReadmeManifestsRetrySIGTERM: in every manifest of the README, a pod
// that gets SIGTERM (evicted, its node drained) exits with a code its
// controller retries, so that the job restarts and resumes from the
// checkpoint written at the stop instead of ending mid-training. Kubeflow's
// training operator, under restartPolicy ExitCode, restarts a replica whose
// exit code is 128 or more and fails the job on 1-127, and a chief that
// exits 0 marks the whole TFJob Succeeded; a Job without a podFailurePolicy
// retries any non-zero exit (within backoffLimit), while an Indexed Job's
// pod that exits 0 counts as its index completed. The peers that were not
// signalled always exit 143.
func TestReadmeManifestsRetrySIGTERM(t *testing.T) {
	blocks := readmeManifests(t)
	n := 0
	for _, docs := range blocks {
		for _, o := range docs {
			switch o.Kind {
			case "TFJob":
				for typ, rs := range o.Spec.TFReplicaSpecs {
					n++
					code := sigtermExitCode(t, rs.Template.Spec.Containers[0].Args)
					if rs.RestartPolicy != "ExitCode" || code < 128 || code > 255 {
						t.Errorf("TFJob %s: restartPolicy %s, a SIGTERM exits %d: the operator would not restart it (ExitCode retries 128-255)", typ, rs.RestartPolicy, code)
					}
				}
			case "Job":
				n++
				code := sigtermExitCode(t, o.Spec.Template.Spec.Containers[0].Args)
				if rp := o.Spec.Template.Spec.RestartPolicy; (rp != "OnFailure" && rp != "Never") || o.Spec.PodFailurePolicy != nil || code == 0 {
					t.Errorf("Job %s: restartPolicy %s, podFailurePolicy %v, a SIGTERM exits %d: want a non-zero code the Job retries", o.Metadata.Name, rp, o.Spec.PodFailurePolicy, code)
				}
			}
		}
	}
	if n < 3 {
		t.Errorf("%d pod templates checked in the README's manifests, want the TFJob's chief and worker and the Job", n)
	}
}

// TestKubernetesManifests reads the TFJob and the Indexed Job from
// README.md, computes every pod's environment (the training operator's
// TF_CONFIG; the Job's env and JOB_COMPLETION_INDEX), checks the cluster
// worker makes of it, and runs each job's pods with exactly that
// environment on emulated hosts where the pods' DNS names resolve: every
// pod ends with the same parameters, logging only JSON on stderr.
func TestKubernetesManifests(t *testing.T) {
	tfjob, indexed := readmePods(t)
	checkPodClusters(t, "TFJob", tfjob)
	checkPodClusters(t, "Indexed Job", indexed)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	h := emulatedHosts(t, ctx, max(len(tfjob), len(indexed)), netns.Gbit)
	for _, job := range []struct {
		name string
		pods []k8sPod
	}{{"TFJob", tfjob}, {"Indexed Job", indexed}} {
		if err := h.SetNames(podNames(job.pods, func(i int) int { return i })); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		res, err := h.RunOnAll(ctx, func(i int) netns.Proc {
			p := job.pods[i]
			args := podArgs(p.args, dir, append(shortPodRun, "--report", filepath.Join(dir, fmt.Sprintf("report%d.json", i)))...)
			return netns.Proc{Args: append([]string{binary}, args...), Env: append([]string{"TF_CONFIG="}, p.env...)}
		})
		if err != nil {
			t.Fatalf("%s: %v", job.name, err)
		}
		checkReports(t, dir, res)
		for i, r := range res {
			checkJSONLines(t, fmt.Sprintf("%s pod %d", job.name, i), r.Stderr)
		}
		if !strings.Contains(res[0].Stdout, "parameters identical on every peer") {
			t.Errorf("%s: the chief printed no cluster table:\n%s", job.name, res[0].Stdout)
		}
		sum := readSummary(t, filepath.Join(dir, "summary.json")) // the manifests' --summary /ckpt/summary.json
		for i, p := range sum.Peers {
			if host, _, _ := strings.Cut(p.Addr, ":"); host != job.pods[i].name {
				t.Errorf("%s: the summary's rank %d is %s, want pod %s", job.name, i, p.Addr, job.pods[i].name)
			}
		}
	}
}

// watchedWriter keeps a process's output and closes matched at the first
// line matching re.
type watchedWriter struct {
	re      *regexp.Regexp
	matched chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
	scanned int
}

func newWatchedWriter(re *regexp.Regexp) *watchedWriter {
	return &watchedWriter{re: re, matched: make(chan struct{})}
}

func (w *watchedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.re == nil || w.scanned < 0 {
		return len(p), nil
	}
	sc := bufio.NewScanner(bytes.NewReader(w.buf.Bytes()[w.scanned:]))
	for sc.Scan() {
		if w.re.MatchString(sc.Text()) {
			close(w.matched)
			w.scanned = -1
			return len(p), nil
		}
	}
	if i := bytes.LastIndexByte(w.buf.Bytes(), '\n'); i >= 0 {
		w.scanned = i + 1
	}
	return len(p), nil
}

func (w *watchedWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// podProc is a started worker.
type podProc struct {
	cmd    *exec.Cmd
	stdout strings.Builder
	stderr *watchedWriter
	done   chan struct{}
	err    error
}

// startProc starts cmd with env added, watching its stderr (the log) for
// re (nil: nothing).
func startProc(t *testing.T, cmd *exec.Cmd, env []string, re *regexp.Regexp) *podProc {
	t.Helper()
	p := &podProc{cmd: cmd, stderr: newWatchedWriter(re), done: make(chan struct{})}
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &p.stdout, p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p
}

// wait returns the process's exit code, or fails the test at ctx's end.
func (p *podProc) wait(t *testing.T, ctx context.Context, who string) int {
	t.Helper()
	select {
	case <-p.done:
		return exitCode(p.err)
	case <-ctx.Done():
		t.Fatalf("%s still running: %v\n%s", who, ctx.Err(), p)
		return -1
	}
}

func (p *podProc) String() string {
	return fmt.Sprintf("--- stdout\n%s--- stderr\n%s", p.stdout.String(), p.stderr)
}

// stoppedAt reads the step all peers stopped after from a worker's stderr.
var stoppedAt = regexp.MustCompile(`every peer stopped after step (\d+)`)

// TestLongKubernetesRescheduled runs the README's Indexed Job on emulated
// hosts with --checkpoint-dir on storage they all mount, evicts pod 1
// (SIGTERM) mid-run, then reschedules the job with every pod on another
// host: every peer stops after the same step, pod 1 first saying it was
// asked (exit 143, the default), the others naming it;
// the restarted job resumes from that step on every rank. Restarted with
// each pod its own directory (not shared: the chief's holding the newest
// checkpoint, the others empty), every pod fails naming that.
func TestLongKubernetesRescheduled(t *testing.T) {
	longtest.Require(t, "a Kubernetes job rescheduled onto other emulated hosts")
	_, pods := readmePods(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	h := emulatedHosts(t, ctx, len(pods), netns.Gbit)
	n, shared := len(pods), t.TempDir()
	run := slices.Clip(append(slices.Clone(shortPodRun), "--epochs", "30")) // clipped: each pod appends its own --report
	if err := h.SetNames(podNames(pods, func(i int) int { return i })); err != nil {
		t.Fatal(err)
	}
	procs := make([]*podProc, n)
	for i, p := range pods {
		args := podArgs(p.args, shared, append(run, "--link-delay", "1ms")...) // slow enough to stop mid-run
		procs[i] = startProc(t, h.Command(ctx, i, binary, args...), append([]string{"TF_CONFIG="}, p.env...), regexp.MustCompile(`"msg":"epoch".*"epoch":1,`))
	}
	select {
	case <-procs[1].stderr.matched:
	case <-procs[1].done:
		t.Fatalf("pod 1 ended before it logged epoch 1:\n%s", procs[1])
	case <-ctx.Done():
		t.Fatalf("pod 1 never ended epoch 1:\n%s", procs[1])
	}
	if err := procs[1].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	step := ""
	for i, p := range procs {
		code := p.wait(t, ctx, fmt.Sprintf("pod %d", i))
		m := stoppedAt.FindStringSubmatch(p.stderr.String())
		want := "rank 1 asked to stop (SIGTERM)"
		if code != 143 || m == nil || !strings.Contains(p.stderr.String(), want) {
			t.Fatalf("pod %d: exit %d, want 143 and %q with the step:\n%s", i, code, want, p)
		}
		if step != "" && m[1] != step {
			t.Errorf("pod %d stopped after step %s, pod 0 after %s", i, m[1], step)
		}
		step = m[1]
		checkJSONLines(t, fmt.Sprintf("pod %d", i), p.stderr.String())
	}
	s, _ := strconv.Atoi(step)
	ck := filepath.Join(shared, fmt.Sprintf("ckpt-%09d.safetensors", s))
	if _, err := os.Stat(ck); err != nil || s%mirrored.StopVoteEvery != 0 {
		t.Fatalf("stopped after step %d (votes every %d): checkpoint %v", s, mirrored.StopVoteEvery, err)
	}
	t.Logf("every pod stopped after step %d; %s written", s, ck)
	stopCk := filepath.Join(t.TempDir(), filepath.Base(ck)) // the resumed run's --keep-checkpoints removes it
	copyFile(t, ck, stopCk)

	// Rescheduled: pod i now on host i+1.
	at := func(i int) int { return (i + 1) % n }
	if err := h.SetNames(podNames(pods, at)); err != nil {
		t.Fatal(err)
	}
	reports := t.TempDir()
	res, err := h.RunOnAll(ctx, func(host int) netns.Proc {
		i := (host + n - 1) % n
		args := podArgs(pods[i].args, shared, append(run, "--report", filepath.Join(reports, fmt.Sprintf("pod%d.json", i)))...)
		return netns.Proc{Args: append([]string{binary}, args...), Env: append([]string{"TF_CONFIG="}, pods[i].env...)}
	})
	if err != nil {
		t.Fatal(err)
	}
	var params string
	for i := range pods {
		var sum mirrored.Summary
		b, err := os.ReadFile(filepath.Join(reports, fmt.Sprintf("pod%d.json", i)))
		if err == nil {
			err = json.Unmarshal(b, &sum)
		}
		if err != nil || sum.Run == nil {
			t.Fatalf("pod %d's report: %v\n%s", i, err, res[at(i)])
		}
		p := sum.Peer
		if p.Rank != i || p.ResumedStep != s || p.Steps != sum.Run.Steps-s || (params != "" && p.ParamsSHA256 != params) {
			t.Errorf("pod %d on host %d: rank %d resumed at step %d, ran %d of %d steps, params %.12s; want rank %d resumed at %d, params %.12s",
				i, at(i), p.Rank, p.ResumedStep, p.Steps, sum.Run.Steps, p.ParamsSHA256, i, s, params)
		}
		params = p.ParamsSHA256
	}

	// Not shared: each pod its own directory, the chief's with the newest.
	for i, p := range pods {
		own := filepath.Join(reports, fmt.Sprintf("own%d", i))
		if err := os.MkdirAll(own, 0o755); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			copyFile(t, stopCk, filepath.Join(own, filepath.Base(ck)))
		}
		procs[i] = startProc(t, h.Command(ctx, at(i), binary, podArgs(p.args, own, run...)...), append([]string{"TF_CONFIG="}, p.env...), nil)
	}
	want := "--checkpoint-dir differs between the peers: rank 0 (the chief) sees " + filepath.Base(ck)
	for i, p := range procs {
		if code := p.wait(t, ctx, fmt.Sprintf("pod %d", i)); code != 1 || !strings.Contains(p.stderr.String(), want) {
			t.Errorf("pod %d: exit %d, want 1 and an error containing %q:\n%s", i, code, want, p)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err == nil {
		err = os.WriteFile(to, b, 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// httpStatus is the status of GET url, or 0 if it cannot be had.
func httpStatus(url string) int {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitStatus waits, until ctx ends, for GET url to answer code.
func waitStatus(t *testing.T, ctx context.Context, url string, code int) {
	t.Helper()
	for httpStatus(url) != code {
		select {
		case <-ctx.Done():
			t.Fatalf("%s never answered %d (last %d)", url, code, httpStatus(url))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestWorkerSIGTERM runs two workers as pods would run them (JSON logs,
// probes on --health-addr, a shared --checkpoint-dir): /readyz answers
// 200 once a worker listens, /readyz/cluster 503 while a peer is missing
// and 200 once the cluster has formed. SIGTERM to
// both (the job deleted) stops both after the same step, exit 143 (128 +
// SIGTERM, by default), the chief's checkpoint there; SIGTERM to one (an
// eviction) exits it 143 saying so and the other 143 naming it; the
// restarted job resumes from that step.
func TestWorkerSIGTERM(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ckdir := t.TempDir()
	start := func(signalled ...int) (steps []int, codes []int, logs []string) {
		addrs, health := freePorts(t, 2), freePorts(t, 2)
		procs := make([]*podProc, 2)
		for i := range procs {
			args := append([]string{"--log-format", "json", "worker", "--checkpoint-dir", ckdir, "--health-addr", health[i], "--link-delay", "1ms"},
				append(slices.Clone(shortPodRun), "--epochs", "30")...)
			procs[i] = startProc(t, exec.CommandContext(ctx, binary, args...), []string{e2eSecret, "TF_CONFIG=" + tfConfig(addrs, i)}, nil)
			if i == 0 { // listening (ready to be dialled), its cluster not formed: its peer is missing
				waitStatus(t, ctx, "http://"+health[0]+"/readyz", 200)
				if code := httpStatus("http://" + health[0] + "/readyz/cluster"); code != 503 {
					t.Errorf("/readyz/cluster answered %d with one peer missing, want 503", code)
				}
			}
		}
		for i := range procs {
			waitStatus(t, ctx, "http://"+health[i]+"/readyz/cluster", 200)
		}
		for _, i := range signalled {
			if err := procs[i].cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
		for i, p := range procs {
			codes = append(codes, p.wait(t, ctx, fmt.Sprintf("worker %d", i)))
			m := regexp.MustCompile(`rank \d done: (\d+) steps`).FindStringSubmatch(p.stdout.String()) // since the start or resume
			if m == nil {
				t.Fatalf("worker %d: no result line:\n%s", i, p)
			}
			n, _ := strconv.Atoi(m[1])
			steps, logs = append(steps, n), append(logs, p.stderr.String())
			checkJSONLines(t, fmt.Sprintf("worker %d", i), p.stderr.String())
		}
		return steps, codes, logs
	}

	steps, codes, logs := start(0, 1) // the job deleted
	s := steps[0]
	for i := range steps {
		if codes[i] != 143 || steps[i] != s || s%mirrored.StopVoteEvery != 0 || !strings.Contains(logs[i], "stopped on SIGTERM: rank ") {
			t.Errorf("worker %d: exit %d after %d steps (worker 0: %d), want 143 after the same step and the stop logged:\n%s", i, codes[i], steps[i], s, logs[i])
		}
	}
	if _, err := os.Stat(filepath.Join(ckdir, fmt.Sprintf("ckpt-%09d.safetensors", s))); err != nil {
		t.Errorf("no checkpoint at step %d: %v", s, err)
	}

	steps, codes, logs = start(1) // worker 1 evicted; the run resumes at s
	want := fmt.Sprintf("rank 1 asked to stop (SIGTERM): every peer stopped after step %d", s+steps[0])
	if codes[0] != 143 || codes[1] != 143 || steps[0] != steps[1] || steps[0] == 0 || !strings.Contains(logs[0], want) || !strings.Contains(logs[1], "stopped on SIGTERM") {
		t.Errorf("exits %v after steps %v (resumed at %d), want 143 from both after the same step, worker 0 saying %q and worker 1 that it got SIGTERM:\n%s\n%s", codes, steps, s, want, logs[0], logs[1])
	}
	if !strings.Contains(logs[0], `"msg":"resumed"`) {
		t.Errorf("worker 0 did not log its resume:\n%s", logs[0])
	}
}

// TestLongKubernetesLatePod: the Indexed Job's last pod is scheduled late, and
// its name resolves only from then on (its DNS record appears with its
// IP): the others keep dialling its name until it resolves, and the run
// ends as usual.
func TestLongKubernetesLatePod(t *testing.T) {
	longtest.Require(t, "a late pod on emulated hosts")
	_, pods := readmePods(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	n := len(pods)
	h := emulatedHosts(t, ctx, n, netns.Gbit)
	early := podNames(pods[:n-1], func(i int) int { return i })
	if err := h.SetNames(early); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	procs := make([]*podProc, n)
	for i, p := range pods {
		if i == n-1 {
			// Past the resolver's 5 s cache of /etc/hosts, so the name is
			// looked up again after it failed.
			select {
			case <-time.After(6 * time.Second):
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			}
			if err := h.SetNames(podNames(pods, func(i int) int { return i })); err != nil {
				t.Fatal(err)
			}
		}
		args := podArgs(p.args, dir, append(slices.Clone(shortPodRun), "--report", filepath.Join(dir, fmt.Sprintf("report%d.json", i)))...)
		procs[i] = startProc(t, h.Command(ctx, i, binary, args...), append([]string{"TF_CONFIG="}, p.env...), nil)
	}
	res := make([]netns.Result, n)
	for i, p := range procs {
		if code := p.wait(t, ctx, fmt.Sprintf("pod %d", i)); code != 0 {
			t.Fatalf("pod %d: exit %d\n%s", i, code, p)
		}
		res[i] = netns.Result{Host: i, Stdout: p.stdout.String(), Stderr: p.stderr.String()}
	}
	checkReports(t, dir, res)
}

// TestWorkerSIGTERMGossip: SIGTERM to one of three gossip workers (an
// eviction) spreads through the gossip stop flag: every worker ends within
// seconds with the final swap among all three, every one exits 143 (the
// signalled one by default, the others naming it), and the chief's summary says who asked.
func TestWorkerSIGTERMGossip(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	addrs, health := freePorts(t, 3), freePorts(t, 3)
	summary := filepath.Join(t.TempDir(), "summary.json")
	procs := make([]*podProc, 3)
	for i := range procs {
		args := append([]string{"worker", "--strategy", "gossip", "--health-addr", health[i], "--summary", summary},
			append(slices.Clone(shortPodRun), "--epochs", "1000")...)
		procs[i] = startProc(t, exec.CommandContext(ctx, binary, args...), []string{e2eSecret, "TF_CONFIG=" + tfConfig(addrs, i)}, nil)
	}
	for i := range procs {
		waitStatus(t, ctx, "http://"+health[i]+"/readyz/cluster", 200)
	}
	signalled := time.Now()
	if err := procs[1].cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	want := "rank 1 asked to stop (SIGTERM): every gossip replica stopped"
	for i, p := range procs {
		code := p.wait(t, ctx, fmt.Sprintf("worker %d", i))
		if code != 143 {
			t.Errorf("worker %d: exit %d, want 143:\n%s", i, code, p)
		}
		if i != 1 && !strings.Contains(p.stderr.String(), want) {
			t.Errorf("worker %d does not say %q:\n%s", i, want, p)
		}
	}
	if took := time.Since(signalled); took > 15*time.Second { // --stop-timeout is 25 s
		t.Errorf("the workers took %v to end after the SIGTERM, want a few seconds", took)
	}
	if !strings.Contains(procs[0].stdout.String(), "stopped early: "+want) {
		t.Errorf("the chief's table does not say who asked:\n%s", procs[0])
	}
	var sum struct {
		Run struct {
			Stopped *mirrored.EarlyStop `json:"stopped"`
		} `json:"run"`
	}
	b, err := os.ReadFile(summary)
	if err == nil {
		err = json.Unmarshal(b, &sum)
	}
	if err != nil || sum.Run.Stopped == nil || !slices.Equal(sum.Run.Stopped.Ranks, []int{1}) || !sum.Run.Stopped.Gossip {
		t.Errorf("summary %s: stopped %+v (%v), want rank 1 named, gossip", summary, sum.Run.Stopped, err)
	}
}

// TestLongKubernetesElasticPodRestart runs the README's Indexed Job with
// --elastic on emulated hosts whose pod names resolve, kills pod 1's
// worker mid-run (fault injection: its host closes without a goodbye),
// and starts it again in the same pod, as the kubelet does under
// restartPolicy OnFailure (same index, name and address; MESHTRAIN_RESTART
// is launch's mark that drops the kill of its first life): the others
// go on without it, it rejoins at a commit, and all three end identical.
func TestLongKubernetesElasticPodRestart(t *testing.T) {
	longtest.Require(t, "an elastic pod restart on emulated hosts")
	_, pods := readmePods(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	n := len(pods)
	h := emulatedHosts(t, ctx, n, netns.Gbit)
	if err := h.SetNames(podNames(pods, func(i int) int { return i })); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	run := []string{"--elastic", "--model", "lenet", "--epochs", "2", "--batch", "16", "--train-examples", "4000", "--test-examples", "500",
		"--hash-every", "10", "--commit-every", "5", "--collective-timeout", "4s", "--kill-rank", "1", "--kill-after", "20"}
	start := func(i int, life string, env ...string) *podProc {
		args := podArgs(pods[i].args, dir, append(slices.Clone(run), "--report", filepath.Join(dir, fmt.Sprintf("report%d%s.json", i, life)))...)
		return startProc(t, h.Command(ctx, i, binary, args...), append(append([]string{"TF_CONFIG="}, pods[i].env...), env...), nil)
	}
	procs := make([]*podProc, n)
	for i := range pods {
		procs[i] = start(i, "")
	}
	if code := procs[1].wait(t, ctx, "pod 1's first life"); code == 0 {
		t.Fatalf("pod 1 was not killed:\n%s", procs[1])
	}
	procs[1] = start(1, "-again", launch.RestartEnv+"=1")
	var sums []mirrored.Summary
	for i, p := range procs {
		if code := p.wait(t, ctx, fmt.Sprintf("pod %d", i)); code != 0 {
			t.Fatalf("pod %d: exit %d\n%s", i, code, p)
		}
		life := ""
		if i == 1 {
			life = "-again"
		}
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("report%d%s.json", i, life)))
		var s mirrored.Summary
		if err == nil {
			err = json.Unmarshal(b, &s)
		}
		if err != nil || s.Run == nil {
			t.Fatalf("pod %d's report: %v", i, err)
		}
		sums = append(sums, s)
	}
	ms := sums[0].Run.Membership
	if len(ms) != 2 || !slices.Equal(ms[0].Left, []int{1}) || !slices.Equal(ms[1].Joined, []int{1}) {
		t.Errorf("record %+v: want pod 1 to leave, then to rejoin", ms)
	}
	for i, s := range sums {
		if s.Run.ParamsSHA256 != sums[0].Run.ParamsSHA256 {
			t.Errorf("pod %d ended with %s, pod 0 with %s", i, s.Run.ParamsSHA256, sums[0].Run.ParamsSHA256)
		}
	}
}
