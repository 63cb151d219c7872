package helmcheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/adapters/postgres/pgtest"
	"gopkg.in/yaml.v3"
	"helm.sh/helm/v4/pkg/action"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	release "helm.sh/helm/v4/pkg/release/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8syaml "sigs.k8s.io/yaml"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

const chartDir = "../helm/countersign"

// required are the values an operator must give: the two Secrets.
func required() map[string]any {
	return map[string]any{
		"database":   map[string]any{"existingSecret": "countersign-database"},
		"signingKey": map[string]any{"existingSecret": "countersign-signing-key"},
	}
}

// render renders the chart with vals as `helm template` does (a client-only
// dry run of an install) and returns its manifest.
func render(t *testing.T, vals map[string]any) (string, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load %s: %v", chartDir, err)
	}
	return renderChart(chrt, vals)
}

func renderChart(chrt *chart.Chart, vals map[string]any) (string, error) {
	inst := action.NewInstall(action.NewConfiguration())
	inst.DryRunStrategy = action.DryRunClient
	inst.ReleaseName = "cs"
	inst.Namespace = "approvals"
	inst.Replace = true
	rel, err := inst.RunWithContext(context.Background(), chrt, vals)
	if err != nil {
		return "", err
	}
	r, ok := rel.(*release.Release)
	if !ok {
		return "", fmt.Errorf("the release is a %T", rel)
	}
	return r.Manifest, nil
}

// objects are the chart's objects, decoded strictly (a field Kubernetes
// does not know fails the test: a typo in a template is caught here).
type objects struct {
	cm  *corev1.ConfigMap
	dep *appsv1.Deployment
	svc *corev1.Service
	pdb *policyv1.PodDisruptionBudget
	pvc *corev1.PersistentVolumeClaim // the anchor volume's, when the chart makes it
}

func decode(t *testing.T, manifest string) objects {
	t.Helper()
	var o objects
	for _, doc := range strings.Split(manifest, "\n---") {
		if strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(doc), "---")) == "" {
			continue
		}
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := k8syaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("a manifest is not YAML: %v\n%s", err, doc)
		}
		var into any
		switch meta.Kind {
		case "ConfigMap":
			o.cm = &corev1.ConfigMap{}
			into = o.cm
		case "Deployment":
			o.dep = &appsv1.Deployment{}
			into = o.dep
		case "Service":
			o.svc = &corev1.Service{}
			into = o.svc
		case "PodDisruptionBudget":
			o.pdb = &policyv1.PodDisruptionBudget{}
			into = o.pdb
		case "PersistentVolumeClaim":
			o.pvc = &corev1.PersistentVolumeClaim{}
			into = o.pvc
		default:
			t.Fatalf("the chart makes a %q, which this check does not know", meta.Kind)
		}
		if err := k8syaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %v\n%s", meta.Kind, err, doc)
		}
	}
	if o.cm == nil || o.dep == nil || o.svc == nil || o.pdb == nil {
		t.Fatalf("the chart should make a ConfigMap, a Deployment, a Service and a PodDisruptionBudget; it made %+v", o)
	}
	return o
}

// TestChartLints runs Helm's own lint on the chart, strictly: a warning
// fails as an error does (an INFO, such as "icon is recommended", does not).
func TestChartLints(t *testing.T) {
	lint := action.NewLint()
	lint.Strict = true
	res := lint.Run([]string{chartDir}, required())
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s, want no warning", m)
		}
	}
	for _, err := range res.Errors {
		t.Errorf("helm lint: %v", err)
	}
}

// TestChartObjects renders the chart with its defaults and the two Secrets
// named, and checks what running Countersign for real needs: three
// replicas on PostgreSQL, probes on /healthz and /readyz, every secret from
// a Secret (none in the manifest), a sandboxed non-root pod, a Service and
// a PodDisruptionBudget selecting the pods, and a config that says
// postgres, reads the URL from the variable the Deployment sets, and signs
// with the mounted key.
func TestChartObjects(t *testing.T) {
	vals := required()
	vals["env"] = []any{map[string]any{"name": "SLACK_BOT_TOKEN", "secret": "countersign-slack", "key": "bot-token"}}
	manifest, err := render(t, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	o := decode(t, manifest)
	d := o.dep.Spec
	if d.Replicas == nil || *d.Replicas != 3 {
		t.Errorf("replicas %v, want 3", d.Replicas)
	}
	pod := d.Template
	for k, v := range d.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("the Deployment's selector %s=%s does not select its pods (%v)", k, v, pod.Labels)
		}
	}
	ps := pod.Spec
	if sc := ps.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532 || sc.SeccompProfile == nil {
		t.Errorf("pod security context %+v, want runAsNonRoot, user 65532 (the image's), a seccomp profile", ps.SecurityContext)
	}
	if ps.AutomountServiceAccountToken == nil || *ps.AutomountServiceAccountToken {
		t.Error("the pod mounts a service account token; Countersign never calls the Kubernetes API")
	}
	if ps.TerminationGracePeriodSeconds == nil || *ps.TerminationGracePeriodSeconds < 25 {
		t.Errorf("terminationGracePeriodSeconds %v, want at least 25 (serve drains for up to 20s)", ps.TerminationGracePeriodSeconds)
	}
	if len(ps.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(ps.Containers))
	}
	c := ps.Containers[0]
	if c.Image != "ghcr.io/countersign/countersign:0.1.0" {
		t.Errorf("image %q, want the repository at the chart's appVersion", c.Image)
	}
	if strings.Join(c.Args, " ") != "serve --config /etc/countersign/config.yaml" {
		t.Errorf("args %q, want %q", c.Args, "serve --config /etc/countersign/config.yaml")
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != 8080 {
		t.Errorf("ports %+v, want http 8080", c.Ports)
	}
	for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		want := "/readyz"
		if name == "liveness" {
			want = "/healthz"
		}
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != want || p.HTTPGet.Port != intstr.FromString("http") {
			t.Errorf("%s probe %+v, want GET %s on http", name, p, want)
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
		if e.Value != "" && e.Name != "COUNTERSIGN_LISTEN" {
			t.Errorf("env %s has a literal value in the manifest; secrets come from Secrets", e.Name)
		}
	}
	for name, ref := range map[string][2]string{"COUNTERSIGN_DATABASE_URL": {"countersign-database", "url"}, "SLACK_BOT_TOKEN": {"countersign-slack", "bot-token"}} {
		e := env[name]
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != ref[0] || e.ValueFrom.SecretKeyRef.Key != ref[1] {
			t.Errorf("env %s: %+v, want from the Secret %s, key %s", name, e, ref[0], ref[1])
		}
	}
	if env["COUNTERSIGN_LISTEN"].Value != ":8080" {
		t.Errorf("COUNTERSIGN_LISTEN %+v, want :8080", env["COUNTERSIGN_LISTEN"])
	}
	if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
		t.Errorf("container security context %+v, want a read-only root, no privilege escalation, every capability dropped", c.SecurityContext)
	}
	var keyVolume *corev1.Volume
	for i, v := range ps.Volumes {
		if v.Secret != nil {
			keyVolume = &ps.Volumes[i]
		}
	}
	if keyVolume == nil || keyVolume.Secret.SecretName != "countersign-signing-key" || keyVolume.Secret.DefaultMode == nil || *keyVolume.Secret.DefaultMode != 0o400 {
		t.Errorf("signing key volume %+v, want the Secret countersign-signing-key, mode 0400", keyVolume)
	}

	s := o.svc.Spec
	for k, v := range s.Selector {
		if pod.Labels[k] != v {
			t.Errorf("the Service's selector %s=%s does not select the pods", k, v)
		}
	}
	if len(s.Ports) != 1 || s.Ports[0].Port != 80 || s.Ports[0].TargetPort != intstr.FromString("http") {
		t.Errorf("service ports %+v, want 80 -> http", s.Ports)
	}
	p := o.pdb.Spec
	if p.MaxUnavailable == nil || p.MaxUnavailable.IntValue() != 1 || p.Selector == nil {
		t.Errorf("PodDisruptionBudget %+v, want maxUnavailable 1", p)
	}
	for k, v := range p.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("the PodDisruptionBudget's selector %s=%s does not select the pods", k, v)
		}
	}
	if pod.Annotations["checksum/config"] == "" {
		t.Error("no checksum/config annotation: a changed config would not roll the pods")
	}

	var cfg struct {
		Listen string `yaml:"listen"`
		Store  struct {
			Engine   string `yaml:"engine"`
			Postgres struct {
				DSNEnv string `yaml:"dsn_env"`
			} `yaml:"postgres"`
		} `yaml:"store"`
		Audit struct {
			SigningKey string `yaml:"signing_key"`
			Anchor     struct {
				File string `yaml:"file"`
			} `yaml:"anchor"`
		} `yaml:"audit"`
		Log struct {
			Format string `yaml:"format"`
		} `yaml:"log"`
	}
	if err := yaml.Unmarshal([]byte(o.cm.Data["config.yaml"]), &cfg); err != nil {
		t.Fatalf("config.yaml: %v", err)
	}
	if cfg.Store.Engine != "postgres" || cfg.Store.Postgres.DSNEnv != "COUNTERSIGN_DATABASE_URL" || cfg.Audit.SigningKey != "/etc/countersign/keys/signing.key" || cfg.Listen != ":8080" || cfg.Log.Format != "json" {
		t.Errorf("config.yaml: %+v\nwant postgres, the URL from COUNTERSIGN_DATABASE_URL, the mounted key, :8080, json logs", cfg)
	}

	// One anchor file for the cluster, on a ReadWriteMany claim every
	// replica mounts, kept on uninstall.
	if cfg.Audit.Anchor.File != "/var/lib/countersign/anchors/audit.anchors" {
		t.Errorf("audit.anchor.file %q, want the file on the shared anchor volume", cfg.Audit.Anchor.File)
	}
	if o.pvc == nil {
		t.Fatal("no PersistentVolumeClaim for the anchor file")
	}
	if m := o.pvc.Spec.AccessModes; len(m) != 1 || m[0] != corev1.ReadWriteMany {
		t.Errorf("anchor claim access modes %v, want [ReadWriteMany] (every replica mounts it)", m)
	}
	if o.pvc.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Errorf("anchor claim annotations %v, want helm.sh/resource-policy: keep", o.pvc.Annotations)
	}
	var claimed, mounted bool
	for _, v := range ps.Volumes {
		if v.Name == "anchors" && v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == o.pvc.Name && !v.PersistentVolumeClaim.ReadOnly {
			claimed = true
		}
	}
	for _, m := range c.VolumeMounts {
		if m.Name == "anchors" && m.MountPath == "/var/lib/countersign/anchors" && !m.ReadOnly {
			mounted = true
		}
	}
	if !claimed || !mounted {
		t.Errorf("the pod does not mount the anchor claim %s writable at /var/lib/countersign/anchors: volumes %+v, mounts %+v", o.pvc.Name, ps.Volumes, c.VolumeMounts)
	}
}

// TestChartAnchorVolumeChoices: an existing claim is mounted and none is
// made; anchors turned off mount nothing and set no anchor file.
func TestChartAnchorVolumeChoices(t *testing.T) {
	vals := required()
	vals["anchors"] = map[string]any{"existingClaim": "shared-anchors"}
	manifest, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, manifest)
	if o.pvc != nil {
		t.Errorf("the chart made claim %s beside the existing one", o.pvc.Name)
	}
	found := false
	for _, v := range o.dep.Spec.Template.Spec.Volumes {
		found = found || v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "shared-anchors"
	}
	if !found {
		t.Errorf("the existing claim shared-anchors is not mounted: %+v", o.dep.Spec.Template.Spec.Volumes)
	}

	vals = required()
	vals["anchors"] = map[string]any{"enabled": false}
	if manifest, err = render(t, vals); err != nil {
		t.Fatal(err)
	}
	o = decode(t, manifest)
	if o.pvc != nil || strings.Contains(o.cm.Data["config.yaml"], "anchor") {
		t.Errorf("anchors off: claim %v, config:\n%s\nwant no claim and no anchor file", o.pvc, o.cm.Data["config.yaml"])
	}
	for _, v := range o.dep.Spec.Template.Spec.Volumes {
		if v.Name == "anchors" {
			t.Errorf("anchors off, the pod still mounts %+v", v)
		}
	}
}

// TestChartRefuses: the two Secrets are required, and the values schema
// refuses what cannot work, each with a message naming the value.
func TestChartRefuses(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(map[string]any)
		want   string
	}{
		{"no database Secret", func(v map[string]any) { delete(v, "database") }, "database.existingSecret: name the Secret"},
		{"no signing key Secret", func(v map[string]any) { delete(v, "signingKey") }, "signingKey.existingSecret: name the Secret"},
		{"no replica", func(v map[string]any) { v["replicaCount"] = 0 }, "replicaCount"},
		{"a misspelt value", func(v map[string]any) { v["replicas"] = 3 }, "replicas"},
		{"a privileged port", func(v map[string]any) { v["service"] = map[string]any{"targetPort": 80} }, "targetPort"},
		{"anchors in the image's data directory", func(v map[string]any) { v["anchors"] = map[string]any{"mountPath": "/data/anchors"} }, "mountPath"},
		{"an anchor volume size without a unit", func(v map[string]any) { v["anchors"] = map[string]any{"size": "100"} }, "size"},
		{"a secret as a literal", func(v map[string]any) {
			v["env"] = []any{map[string]any{"name": "SLACK_BOT_TOKEN", "value": "xoxb-secret"}}
		}, "env"},
	} {
		t.Run(c.name, func(t *testing.T) {
			vals := required()
			c.change(vals)
			_, err := render(t, vals)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("render: %v\nwant an error naming %q", err, c.want)
			}
		})
	}
	vals := required()
	vals["image"] = map[string]any{"repository": "registry.example/countersign", "digest": "sha256:" + strings.Repeat("ab", 32)}
	manifest, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	if img := decode(t, manifest).dep.Spec.Template.Spec.Containers[0].Image; img != "registry.example/countersign@sha256:"+strings.Repeat("ab", 32) {
		t.Errorf("image with a digest: %q, want repository@digest", img)
	}
}

// TestChartConfigServes renders the chart, writes its config.yaml as the
// pod sees it (the signing key mounted from the Secret), and starts two
// countersign servers with it on one throwaway PostgreSQL database, as two
// replicas of the Deployment: both answer /readyz, so the config the chart
// makes is one Countersign's strict decoding accepts and runs on.
func TestChartConfigServes(t *testing.T) {
	dsn := pgtest.DSN(t)
	dir := t.TempDir()
	keys := filepath.Join(dir, "keys")
	if err := os.Mkdir(keys, 0o700); err != nil {
		t.Fatal(err)
	}
	seed := make([]byte, 32)
	rand.Read(seed)
	if err := os.WriteFile(filepath.Join(keys, "signing.key"), []byte(hex.EncodeToString(seed)), 0o400); err != nil {
		t.Fatal(err)
	}
	anchors := filepath.Join(t.TempDir(), "anchors") // the shared volume, outside dir
	vals := required()
	vals["signingKey"].(map[string]any)["mountPath"] = keys
	vals["anchors"] = map[string]any{"mountPath": anchors}
	manifest, err := render(t, vals)
	if err != nil {
		t.Fatal(err)
	}
	o := decode(t, manifest)
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte(o.cm.Data["config.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "countersign")
	build := exec.Command("go", "build", "-o", bin, "./cmd/countersign")
	build.Dir = "../.." // the repository's own module and go.sum
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// An audit entry for the leader to anchor when it starts to lead.
	mint := exec.Command(bin, "keys", "create", "--config", cfg, "--name", "ward_bot", "--role", "agent")
	mint.Dir = dir
	mint.Env = append(os.Environ(), "COUNTERSIGN_DATABASE_URL="+dsn)
	if out, err := mint.CombinedOutput(); err != nil {
		t.Fatalf("keys create with the chart's config: %v\n%s", err, out)
	}
	var all []*bytes.Buffer // each replica's log
	for replica := range 2 {
		port := freePort(t)
		var logs bytes.Buffer
		all = append(all, &logs)
		serve := exec.Command(bin, "serve", "--config", cfg)
		serve.Dir = dir
		serve.Env = append(os.Environ(), "COUNTERSIGN_DATABASE_URL="+dsn, fmt.Sprintf("COUNTERSIGN_LISTEN=127.0.0.1:%d", port))
		serve.Stdout, serve.Stderr = &logs, &logs
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			serve.Process.Signal(syscall.SIGTERM)
			serve.Wait()
		})
		url := fmt.Sprintf("http://127.0.0.1:%d", port)
		ready := exec.Command(bin, "ready", "--url", url, "--timeout", "60s")
		if out, err := ready.CombinedOutput(); err != nil {
			t.Fatalf("replica %d with the chart's config: %v\n%s\nits log:\n%s", replica, err, out, logs.String())
		}
		resp, err := http.Get(url + "/readyz")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("replica %d /readyz: %v %v, want status 200", replica, err, resp)
		}
		resp.Body.Close()
	}
	// The leader anchored the chain in the shared file.
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(anchors, "audit.anchors"))
		if err == nil && strings.Contains(string(b), `"seq":`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no anchor in %s after both replicas were ready: %v\nreplica 0:\n%s\nreplica 1:\n%s", anchors, err, all[0], all[1])
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
