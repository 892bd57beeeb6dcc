package cluster

import (
	"encoding/json"
	"fmt"
	"strings"
)

// KubeflowPort is the port Kubeflow's training operator puts in a TFJob's
// TF_CONFIG when the container "tensorflow" names no port "tfjob-port".
const KubeflowPort = 2222

// KubeflowTFConfig is the TF_CONFIG Kubeflow's training operator writes
// into the pod of replica (type, index) of TFJob job in namespace:
// json.Marshal of {"cluster", "task", "environment": "cloud"}, each
// replica type in lower case listing "<job>-<type>-<i>.<namespace>.svc:<port>"
// (the operator's headless Service per pod), with clusterDomain appended
// after "svc" when the operator runs with CUSTOM_CLUSTER_DOMAIN set. An
// evaluator is listed like the others (the operator has listed every
// replica type, the evaluator's too, since 2020); it is no rank of the
// training (see Parse). replicas maps
// each type (Chief, Worker, Evaluator, as in tfReplicaSpecs) to its
// replica count and ports to its port (KubeflowPort if absent). Tests use it
// to check that worker accepts exactly what the operator writes.
func KubeflowTFConfig(job, namespace, clusterDomain string, replicas, ports map[string]int, typ string, index int) ([]byte, error) {
	cluster := map[string][]string{}
	for rtype, n := range replicas {
		rt := strings.ToLower(rtype)
		port, ok := ports[rtype]
		if !ok {
			port = KubeflowPort
		}
		for i := range n {
			host := fmt.Sprintf("%s-%s-%d.%s.svc", job, rt, i, namespace)
			if clusterDomain != "" {
				host += "." + clusterDomain
			}
			cluster[rt] = append(cluster[rt], fmt.Sprintf("%s:%d", host, port))
		}
	}
	type task struct {
		Type  string `json:"type"`
		Index int    `json:"index"`
	}
	return json.Marshal(struct {
		Cluster     map[string][]string `json:"cluster"`
		Task        task                `json:"task"`
		Environment string              `json:"environment"`
	}{cluster, task{strings.ToLower(typ), index}, "cloud"})
}
