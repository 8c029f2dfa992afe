package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/intentledger/intentd/testkit/nodetest"
)

const manifestsDir = "kubernetes"

// manifests are the decoded objects of every YAML document under
// deploy/kubernetes, by kind.
type manifests struct {
	statefulSets []*appsv1.StatefulSet
	services     []*corev1.Service
	pdbs         []*policyv1.PodDisruptionBudget
	secrets      []*corev1.Secret
	accounts     []*corev1.ServiceAccount
}

// decodeStrict decodes one YAML document into the k8s.io/api type its
// apiVersion and kind name, rejecting unknown and duplicate fields.
func decodeStrict(doc []byte, m *manifests) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return fmt.Errorf("type of document: %w", err)
	}
	var obj any
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 StatefulSet":
		o := &appsv1.StatefulSet{}
		m.statefulSets, obj = append(m.statefulSets, o), o
	case "v1 Service":
		o := &corev1.Service{}
		m.services, obj = append(m.services, o), o
	case "policy/v1 PodDisruptionBudget":
		o := &policyv1.PodDisruptionBudget{}
		m.pdbs, obj = append(m.pdbs, o), o
	case "v1 Secret":
		o := &corev1.Secret{}
		m.secrets, obj = append(m.secrets, o), o
	case "v1 ServiceAccount":
		o := &corev1.ServiceAccount{}
		m.accounts, obj = append(m.accounts, o), o
	default:
		return fmt.Errorf("kind %q of %q is not one this test knows", tm.Kind, tm.APIVersion)
	}
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return nil
}

// splitDocs splits a YAML stream on its document separators, dropping
// documents that hold only comments.
func splitDocs(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		var content bool
		for _, line := range strings.Split(d, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				content = true
			}
		}
		if content {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func loadManifests(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{}
	var files int
	err := filepath.WalkDir(manifestsDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, doc := range splitDocs(b) {
			if err := decodeStrict(doc, m); err != nil {
				t.Errorf("%s document %d: %v", path, i+1, err)
			}
		}
		return nil
	})
	if err != nil || files == 0 {
		t.Fatalf("%d manifest files, err %v", files, err)
	}
	if len(m.statefulSets) != 1 {
		t.Fatalf("%d StatefulSets, want 1", len(m.statefulSets))
	}
	return m
}

func TestManifestDecodingIsStrict(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		ok   bool
	}{
		{"a valid PodDisruptionBudget", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: x}\nspec: {maxUnavailable: 1}\n", true},
		{"misspelt field (control)", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: x}\nspec: {maxUnavailabe: 1}\n", false},
		{"duplicate field (control)", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: x}\nautomountServiceAccountToken: false\nautomountServiceAccountToken: true\n", false},
		{"wrong type (control)", "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec: {replicas: three}\n", false},
		{"unknown kind (control)", "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n", false},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			err := decodeStrict([]byte(tt.doc), &manifests{})
			if (err == nil) != tt.ok {
				t.Fatalf("err %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

func TestKubernetesManifests(t *testing.T) {
	m := loadManifests(t)
	sts := m.statefulSets[0]
	pod := sts.Spec.Template.Spec
	podLabels := labels.Set(sts.Spec.Template.Labels)
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Containers))
	}
	c := pod.Containers[0]
	args := c.Args
	arg := func(name string) string {
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
				return v
			}
		}
		return ""
	}
	selects := func(sel *metav1.LabelSelector) bool {
		s, err := metav1.LabelSelectorAsSelector(sel)
		return err == nil && !s.Empty() && s.Matches(podLabels)
	}
	service := func(name string) *corev1.Service {
		for _, s := range m.services {
			if s.Name == name {
				return s
			}
		}
		return nil
	}
	secretKeys := map[string]bool{} // "secret/key"
	for _, s := range m.secrets {
		for k := range s.StringData {
			secretKeys[s.Name+"/"+k] = true
		}
	}
	mounts := map[string]string{} // volume name -> mount path
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm.MountPath
	}
	peers := service(sts.Spec.ServiceName)
	pdbOK := len(m.pdbs) == 1 && m.pdbs[0].Spec.MaxUnavailable != nil && m.pdbs[0].Spec.MaxUnavailable.IntValue() == 1 &&
		m.pdbs[0].Spec.MinAvailable == nil && selects(m.pdbs[0].Spec.Selector)
	psc, csc := pod.SecurityContext, c.SecurityContext

	checks := []struct {
		name string
		ok   bool
	}{
		{"3 replicas, started in parallel", sts.Spec.Replicas != nil && *sts.Spec.Replicas == 3 && sts.Spec.PodManagementPolicy == appsv1.ParallelPodManagement},
		{"the selector selects the pod template", selects(sts.Spec.Selector)},
		{"--bootstrap-expect matches the replicas", arg("bootstrap-expect") == "3"},
		{"the governing service is headless and publishes pods before they are ready",
			peers != nil && peers.Spec.ClusterIP == corev1.ClusterIPNone && peers.Spec.PublishNotReadyAddresses && selects(&metav1.LabelSelector{MatchLabels: peers.Spec.Selector})},
		{"the headless service carries Raft and gossip (TCP and UDP)", peers != nil && hasPorts(peers, "8200/TCP", "8300/TCP", "8300/UDP", "8100/TCP")},
		{"a client service on the HTTP port", service("intentd") != nil && service("intentd").Spec.ClusterIP != corev1.ClusterIPNone && hasPorts(service("intentd"), "8100/TCP")},
		{"container ports for every service port", hasContainerPorts(c, "8100/TCP", "8200/TCP", "8300/TCP", "8300/UDP")},
		{"PodDisruptionBudget maxUnavailable 1 over the pods", pdbOK},
		{"readiness on /readyz", c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/readyz"},
		{"liveness on /healthz", c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path == "/healthz"},
		{"probes speak HTTPS as the TLS listener does", arg("tls-cert") != "" && c.ReadinessProbe.HTTPGet.Scheme == corev1.URISchemeHTTPS && c.LivenessProbe.HTTPGet.Scheme == corev1.URISchemeHTTPS},
		{"required anti-affinity on the host", pod.Affinity != nil && pod.Affinity.PodAntiAffinity != nil &&
			slices.ContainsFunc(pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, func(a corev1.PodAffinityTerm) bool {
				return a.TopologyKey == "kubernetes.io/hostname" && selects(a.LabelSelector)
			})},
		{"pod runs as non-root with seccomp RuntimeDefault", psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot &&
			psc.RunAsUser != nil && *psc.RunAsUser == 65532 && psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"container: read-only root, no privilege escalation, every capability dropped", csc != nil && csc.ReadOnlyRootFilesystem != nil && *csc.ReadOnlyRootFilesystem &&
			csc.AllowPrivilegeEscalation != nil && !*csc.AllowPrivilegeEscalation && csc.Capabilities != nil && slices.Equal(csc.Capabilities.Drop, []corev1.Capability{"ALL"}) &&
			len(csc.Capabilities.Add) == 0 && (csc.Privileged == nil || !*csc.Privileged)},
		{"no service account token", pod.AutomountServiceAccountToken != nil && !*pod.AutomountServiceAccountToken},
		{"the data dir is a volume claim template", len(sts.Spec.VolumeClaimTemplates) == 1 && mounts[sts.Spec.VolumeClaimTemplates[0].Name] == arg("data-dir") && arg("data-dir") != ""},
		{"volumes are kept when the set is deleted or scaled", sts.Spec.PersistentVolumeClaimRetentionPolicy != nil &&
			sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenScaled == appsv1.RetainPersistentVolumeClaimRetentionPolicyType &&
			sts.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted == appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
		{"node identity from the pod name", arg("id") == "$(POD_NAME)" && envFrom(c, "POD_NAME") == "metadata.name"},
		{"Raft advertises the pod's stable DNS name", arg("raft-advertise") == "$(POD_NAME)."+sts.Spec.ServiceName+".$(POD_NAMESPACE).svc.cluster.local:8200"},
		{"--join names every initial pod through the headless service", joinsAll(arg("join"), sts.Name, sts.Spec.ServiceName, 3)},
		{"a stopped pod stays a voter", arg("leave-on-terminate") == "false"},
		{"KEK and gossip key from a Secret", secretEnv(c, "INTENTD_KEK", secretKeys) && secretEnv(c, "INTENTD_GOSSIP_KEY", secretKeys)},
		{"API keys file from a mounted Secret", secretMounted(pod, mounts, arg("api-keys-file"), secretKeys)},
		{"TLS files from a mounted Secret", secretMounted(pod, mounts, arg("tls-ca"), secretKeys) &&
			secretMounted(pod, mounts, strings.ReplaceAll(arg("tls-cert"), "$(POD_NAME)", "intentd-0"), secretKeys) &&
			secretMounted(pod, mounts, strings.ReplaceAll(arg("tls-key"), "$(POD_NAME)", "intentd-2"), secretKeys)},
		{"a preStop step before SIGTERM", c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil},
		{"the grace period covers the preStop sleep and intentd's shutdown bound", graceCovers(pod, c, arg("shutdown-timeout"))},
	}
	for _, ck := range checks {
		if !ck.ok {
			t.Errorf("not so: %s", ck.name)
		}
	}
}

func hasPorts(s *corev1.Service, want ...string) bool {
	var got []string
	for _, p := range s.Spec.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		got = append(got, fmt.Sprintf("%d/%s", p.Port, proto))
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

func hasContainerPorts(c corev1.Container, want ...string) bool {
	var got []string
	for _, p := range c.Ports {
		proto := p.Protocol
		if proto == "" {
			proto = corev1.ProtocolTCP
		}
		got = append(got, fmt.Sprintf("%d/%s", p.ContainerPort, proto))
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}

// envFrom returns the field path an environment variable is taken from.
func envFrom(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
	}
	return ""
}

// secretEnv reports whether the variable comes from a key of a Secret the
// manifests define.
func secretEnv(c corev1.Container, name string, keys map[string]bool) bool {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			r := e.ValueFrom.SecretKeyRef
			return keys[r.Name+"/"+r.Key]
		}
	}
	return false
}

// secretMounted reports whether path is a key of a defined Secret mounted
// as a volume of the pod.
func secretMounted(pod corev1.PodSpec, mounts map[string]string, path string, keys map[string]bool) bool {
	for _, v := range pod.Volumes {
		if v.Secret == nil {
			continue
		}
		dir, ok := mounts[v.Name]
		if ok && filepath.Dir(path) == dir && keys[v.Secret.SecretName+"/"+filepath.Base(path)] {
			return true
		}
	}
	return false
}

func joinsAll(join, set, svc string, n int) bool {
	peers := strings.Split(join, ",")
	if len(peers) != n {
		return false
	}
	for i := range n {
		if peers[i] != fmt.Sprintf("%s-%d.%s.$(POD_NAMESPACE).svc.cluster.local:8300", set, i, svc) {
			return false
		}
	}
	return true
}

func graceCovers(pod corev1.PodSpec, c corev1.Container, shutdown string) bool {
	d, err := time.ParseDuration(shutdown)
	if err != nil || pod.TerminationGracePeriodSeconds == nil || c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		return false
	}
	need := time.Duration(c.Lifecycle.PreStop.Sleep.Seconds)*time.Second + d
	return time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second > need
}

// intentdFlags returns the flag names intentd's --help lists.
func intentdFlags(t *testing.T) map[string]bool {
	t.Helper()
	out, _ := exec.Command(nodetest.IntentdBinary(t), "--help").CombinedOutput()
	flags := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllSubmatch(out, -1) {
		flags[string(m[1])] = true
	}
	if len(flags) < 20 || !flags["raft-advertise"] {
		t.Fatalf("intentd --help lists %d flags:\n%s", len(flags), out)
	}
	return flags
}

// unknownArgs returns the args that are not --flag=value for a flag of
// intentd, and the INTENTD_* variables that are not a flag's.
func unknownArgs(args []string, env []corev1.EnvVar, flags map[string]bool) []string {
	var bad []string
	for _, a := range args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !strings.Contains(a, "=") || !flags[name] {
			bad = append(bad, a)
		}
	}
	for _, e := range env {
		if v, ok := strings.CutPrefix(e.Name, "INTENTD_"); ok && !flags[strings.ReplaceAll(strings.ToLower(v), "_", "-")] &&
			e.Name != "INTENTD_KEK" && e.Name != "INTENTD_API_KEYS" {
			bad = append(bad, e.Name)
		}
	}
	return bad
}

func TestManifestArgsAreIntentdFlags(t *testing.T) {
	flags := intentdFlags(t)
	c := loadManifests(t).statefulSets[0].Spec.Template.Spec.Containers[0]
	controls := []struct {
		name string
		args []string
		env  []corev1.EnvVar
		bad  []string
	}{
		{"real flag", []string{"--raft-advertise=x:1"}, []corev1.EnvVar{{Name: "INTENTD_GOSSIP_KEY"}}, nil},
		{"unknown flag (control)", []string{"--raft-advertize=x:1"}, nil, []string{"--raft-advertize=x:1"}},
		{"unknown variable (control)", nil, []corev1.EnvVar{{Name: "INTENTD_GOSIP_KEY"}}, []string{"INTENTD_GOSIP_KEY"}},
		{"positional argument (control)", []string{"serve"}, nil, []string{"serve"}},
	}
	for _, tt := range controls {
		t.Run("control/"+tt.name, func(t *testing.T) {
			if got := unknownArgs(tt.args, tt.env, flags); !slices.Equal(got, tt.bad) {
				t.Fatalf("unknown %v, want %v", got, tt.bad)
			}
		})
	}
	if bad := unknownArgs(c.Args, c.Env, flags); len(bad) > 0 {
		t.Errorf("not intentd flags: %v", bad)
	}
	if !bytes.Contains([]byte(strings.Join(c.Args, " ")), []byte("--leave-on-terminate=false")) {
		t.Error("--leave-on-terminate=false is not explicit")
	}
}
